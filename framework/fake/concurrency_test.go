package fake_test

import (
	"strconv"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/object"
)

// Writers racing on one object lose no update: each stale write conflicts
// and is retried; creates with generateName racing get distinct names.
func TestConcurrentWritersLoseNoUpdate(t *testing.T) {
	cs, _ := clients(t, fake.Options{Objects: []object.Object{configMap("counter", "n", "0")}})
	ctx := t.Context()
	cms := cs.CoreV1().ConfigMaps("ns")
	const writers, each = 8, 10
	var wg sync.WaitGroup
	names := make(chan string, writers*each)
	for range writers {
		wg.Go(func() {
			for range each {
				err := untilNoConflict(func() error {
					cm, err := cms.Get(ctx, "counter", metav1.GetOptions{})
					if err != nil {
						return err
					}
					n, _ := strconv.Atoi(cm.Data["n"])
					cm.Data["n"] = strconv.Itoa(n + 1)
					_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
				gen := configMap("")
				gen.GenerateName = "gen-"
				created, err := cms.Create(ctx, gen, metav1.CreateOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				names <- created.Name
			}
		})
	}
	wg.Wait()
	close(names)
	got, err := cms.Get(ctx, "counter", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data["n"] != strconv.Itoa(writers*each) {
		t.Errorf("counter = %s after %d increments", got.Data["n"], writers*each)
	}
	seen := map[string]bool{}
	for n := range names {
		if seen[n] {
			t.Errorf("generateName gave %s twice", n)
		}
		seen[n] = true
	}
}

// untilNoConflict calls write until it does not conflict: with no backoff
// to run out of, a lost race is retried however often it is lost.
func untilNoConflict(write func() error) error {
	for {
		if err := write(); !apierrors.IsConflict(err) {
			return err
		}
	}
}
