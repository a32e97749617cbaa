package main

import (
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestSignTestP(t *testing.T) {
	for _, c := range []struct {
		wins, n int
		want    float64
	}{
		{8, 10, 56.0 / 1024},  // 0.0547
		{9, 10, 11.0 / 1024},  // 0.0107
		{10, 10, 1.0 / 1024},  // every round won
		{5, 10, 638.0 / 1024}, // half: no evidence
		{0, 10, 1},
		{1, 1, 0.5},
		{2, 2, 0.25},
	} {
		if got := signTestP(c.wins, c.n); !near(got, c.want) {
			t.Errorf("signTestP(%d, %d) = %v, want %v", c.wins, c.n, got, c.want)
		}
	}
}

// The critical values of the signed-rank test at two-sided 0.10, as printed
// in every table: n=6: 2, n=8: 5, n=10: 10, n=20: 60. The interval's lower
// end is the Walsh average of rank critical value + 1.
func TestSignedRankK(t *testing.T) {
	for _, c := range []struct {
		n, k     int
		coverage float64
	}{
		{5, 1, 1 - 2.0/32},     // P(T<=0) = 1/32
		{6, 3, 1 - 2*3.0/64},   // P(T<=2) = 3/64
		{8, 6, 1 - 2*10.0/256}, // P(T<=5) = 10/256
		{10, 11, 1 - 2*43.0/1024},
		{20, 61, 0},
	} {
		k, cov, ok := signedRankK(c.n, 0.10)
		if !ok || k != c.k {
			t.Errorf("signedRankK(%d) = %d, %v, want %d", c.n, k, ok, c.k)
		}
		if c.coverage != 0 && !near(cov, c.coverage) {
			t.Errorf("signedRankK(%d) coverage = %v, want %v", c.n, cov, c.coverage)
		}
	}
	for _, n := range []int{0, 1, 2, 3, 4} {
		if _, _, ok := signedRankK(n, 0.10); ok {
			t.Errorf("signedRankK(%d) gave an interval; %d pairs cannot reach 90 %%", n, n)
		}
	}
}

func TestHodgesLehmann(t *testing.T) {
	// Walsh averages of {1, 2, 4}: 1, 1.5, 2, 2.5, 3, 4; median 2.25.
	if h := hodgesLehmannOf([]float64{4, 1, 2}, 0.10); !near(h.Estimate, 2.25) || h.Coverage != 0 {
		t.Errorf("HL of {1,2,4} = %+v, want estimate 2.25 and no interval", h)
	}
	// 1..10: 55 Walsh averages, symmetric about 5.5; the 11th smallest is
	// 3.5 and the 11th largest 7.5.
	x := []float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}
	h := hodgesLehmannOf(x, 0.10)
	if !near(h.Estimate, 5.5) || !near(h.Lo, 3.5) || !near(h.Hi, 7.5) || !near(h.Coverage, 1-86.0/1024) {
		t.Errorf("HL of 1..10 = %+v, want 5.5 in [3.5, 7.5] at 0.916", h)
	}
	// Powers of two: every Walsh average differs, so the ranks show. The
	// 11th smallest is (1+16)/2, the 11th largest (256+256)/2, the 28th
	// (the median) 64; their neighbours are 8 and 9, 256.5 and 192.
	x = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}
	if h := hodgesLehmannOf(x, 0.10); h.Estimate != 64 || h.Lo != 8.5 || h.Hi != 256 {
		t.Errorf("HL of the powers of two = %+v, want 64 in [8.5, 256]", h)
	}
}

func TestStatsOfRatios(t *testing.T) {
	// Eight of ten above 1; on log r, symmetric about log 1.2.
	r := []float64{1.2, 1.2 * 1.1, 1.2 / 1.1, 1.2 * 1.3, 1.2 / 1.3, 1.2, 1.2 * 1.05, 1.2 / 1.05, 0.8, 1.8}
	s := statsOfRatios(r)
	if s.Pairs != 10 || s.Wins != 8 || !near(s.SignP, 56.0/1024) {
		t.Errorf("wins %d of %d, p %v; want 8 of 10, p 0.0547", s.Wins, s.Pairs, s.SignP)
	}
	if !near(s.Median, 1.2) || !near(s.HL, 1.2) {
		t.Errorf("median %v, HL %v; want 1.2 and 1.2", s.Median, s.HL)
	}
	if !(s.HLLo < 1.2 && s.HLHi > 1.2 && s.HLCoverage > 0.9) {
		t.Errorf("interval [%v, %v] at %v; want one around 1.2 of at least 90 %%", s.HLLo, s.HLHi, s.HLCoverage)
	}
	// Too few pairs: the estimate, but no interval.
	if s := statsOfRatios([]float64{0.9, 1.1}); s.Wins != 1 || s.HLCoverage != 0 || s.HLLo != 0 {
		t.Errorf("two pairs: %+v; want 1 win and no interval", s)
	}
}
