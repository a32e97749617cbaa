package main

import (
	"math"
	"slices"
)

// The statistics of the paired drain: each round gives one ratio r (converge's
// rate over client-go's, both draining the same backlog), and these say how
// sure the rounds make a difference, without assuming how r is distributed.

// signTestP is the exact one-sided sign-test p-value of wins successes out of
// n pairs: the probability of at least wins heads in n tosses of a fair coin.
// For 8 of 10 it is 56/1024 (0.055), for 9 of 10 11/1024 (0.011).
func signTestP(wins, n int) float64 {
	if n <= 0 || wins <= 0 {
		return 1
	}
	var sum float64
	for k := wins; k <= n; k++ {
		sum += binomial(n, k)
	}
	return sum / math.Exp2(float64(n))
}

// binomial is n choose k, as a float64 (exact up to n of about 50).
func binomial(n, k int) float64 {
	if k < 0 || k > n {
		return 0
	}
	k = min(k, n-k)
	c := 1.0
	for i := 1; i <= k; i++ {
		c = c * float64(n-k+i) / float64(i)
	}
	return math.Round(c)
}

// signedRankCDF returns P(T <= t) for t = 0 .. n(n+1)/2, where T is the
// Wilcoxon signed-rank statistic of n pairs under the null hypothesis (every
// sign equally likely): the number of subsets of {1..n} with sum at most t,
// over 2^n.
func signedRankCDF(n int) []float64 {
	m := n * (n + 1) / 2
	counts := make([]float64, m+1) // counts[s]: subsets of {1..i} summing to s
	counts[0] = 1
	for i := 1; i <= n; i++ {
		for s := m; s >= i; s-- {
			counts[s] += counts[s-i]
		}
	}
	cdf := make([]float64, m+1)
	total := math.Exp2(float64(n))
	var acc float64
	for s, c := range counts {
		acc += c
		cdf[s] = acc / total
	}
	return cdf
}

// signedRankK returns k, the rank among the n(n+1)/2 sorted Walsh averages of
// the lower end of the two-sided confidence interval of level at least 1-alpha
// for the centre of n pairs' differences (the upper end is the k-th largest),
// and the interval's exact coverage. k is one more than the largest t with
// P(T <= t) <= alpha/2. ok is false when n is too small for any interval of
// that level (at alpha 0.10, fewer than 5 pairs).
func signedRankK(n int, alpha float64) (k int, coverage float64, ok bool) {
	if n < 1 {
		return 0, 0, false
	}
	cdf := signedRankCDF(n)
	t := -1
	for s, p := range cdf {
		if p > alpha/2+1e-12 {
			break
		}
		t = s
	}
	if t < 0 {
		return 0, 0, false
	}
	return t + 1, 1 - 2*cdf[t], true
}

// walshAverages returns the sorted averages (x_i + x_j)/2 over i <= j.
func walshAverages(x []float64) []float64 {
	w := make([]float64, 0, len(x)*(len(x)+1)/2)
	for i := range x {
		for j := i; j < len(x); j++ {
			w = append(w, (x[i]+x[j])/2)
		}
	}
	slices.Sort(w)
	return w
}

// hodgesLehmann is the Hodges–Lehmann estimate of the centre of x (the median
// of its Walsh averages) and, when x has enough values, the confidence
// interval of level at least 1-alpha the Wilcoxon signed-rank test gives, with
// its exact coverage.
type hodgesLehmann struct {
	Estimate, Lo, Hi float64
	Coverage         float64 // 0: too few values for an interval
}

func hodgesLehmannOf(x []float64, alpha float64) hodgesLehmann {
	if len(x) == 0 {
		return hodgesLehmann{Estimate: math.NaN(), Lo: math.NaN(), Hi: math.NaN()}
	}
	w := walshAverages(x)
	h := hodgesLehmann{Estimate: median(w), Lo: math.NaN(), Hi: math.NaN()}
	if k, cov, ok := signedRankK(len(x), alpha); ok {
		h.Lo, h.Hi, h.Coverage = w[k-1], w[len(w)-k], cov
	}
	return h
}

// ratioStats are the statistics of the ratios r_i of one set of pairs.
type ratioStats struct {
	Pairs  int     `json:"pairs"`
	Wins   int     `json:"wins"`   // r > 1
	SignP  float64 `json:"signP"`  // exact one-sided sign test of the wins
	Median float64 `json:"median"` // of r
	// HL is exp of the Hodges–Lehmann estimate on log r, HLLo and HLHi the
	// ends of its confidence interval from the Wilcoxon signed-rank test
	// (level HLCoverage, at least 90 %); 0 when there are too few pairs.
	HL         float64 `json:"hl"`
	HLLo       float64 `json:"hlLo"`
	HLHi       float64 `json:"hlHi"`
	HLCoverage float64 `json:"hlCoverage"`
}

// statsOfRatios computes the statistics of ratios, each converge's rate over
// client-go's in one pair.
func statsOfRatios(r []float64) ratioStats {
	s := ratioStats{Pairs: len(r)}
	logs := make([]float64, len(r))
	for i, v := range r {
		if v > 1 {
			s.Wins++
		}
		logs[i] = math.Log(v)
	}
	s.SignP = signTestP(s.Wins, len(r))
	if len(r) == 0 {
		return s
	}
	s.Median = median(r)
	h := hodgesLehmannOf(logs, 0.10)
	s.HL = math.Exp(h.Estimate)
	if h.Coverage > 0 {
		s.HLLo, s.HLHi, s.HLCoverage = math.Exp(h.Lo), math.Exp(h.Hi), h.Coverage
	}
	return s
}
