package envtest_test

import (
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/framework/envtest"
)

func TestTwoEnvironmentsAtOnceThenStop(t *testing.T) {
	t.Parallel()
	requireControlPlane(t)
	ctx := t.Context()

	var (
		envs = [2]*envtest.Environment{envtest.New(envtest.Options{}), envtest.New(envtest.Options{})}
		cfgs [2]*rest.Config
		errs [2]error
		took [2]time.Duration
		wg   sync.WaitGroup
	)
	for i, env := range envs {
		t.Cleanup(func() { _ = env.Stop() })
		wg.Go(func() {
			start := time.Now()
			cfgs[i], errs[i] = env.Start(ctx)
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Start environment %d: %v", i, err)
		}
		// The start-up time: from Start to a ready control plane, two starting at once.
		t.Logf("environment %d: ready in %v at %s (folder %s)", i, took[i].Round(time.Millisecond), envs[i].APIServerURL(), envs[i].Dir())
	}
	if envs[0].APIServerURL() == envs[1].APIServerURL() || envs[0].Dir() == envs[1].Dir() || envs[0].EtcdURL() == envs[1].EtcdURL() {
		t.Fatal("the two environments share a port or a folder")
	}

	// Each works, and each has its own data.
	for i, cfg := range cfgs {
		cm := configMap("default", "who", map[string]string{"env": string(rune('0' + i))})
		if _, err := clientset(t, cfg).CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("environment %d: create: %v", i, err)
		}
	}
	for i, cfg := range cfgs {
		got, err := clientset(t, cfg).CoreV1().ConfigMaps("default").Get(ctx, "who", metav1.GetOptions{})
		if err != nil || got.Data["env"] != string(rune('0'+i)) {
			t.Errorf("environment %d: get = %v, %v; want its own ConfigMap", i, got, err)
		}
	}

	for i, env := range envs {
		dir := env.Dir()
		procs, procOK := childProcesses(t, os.Getpid(), dir)
		if procOK {
			var names []string
			for _, p := range procs {
				names = append(names, p.comm)
				if p.pgid != p.pid {
					t.Errorf("environment %d: %s (pid %d) is in process group %d, want its own", i, p.comm, p.pid, p.pgid)
				}
			}
			if got := strings.Join(names, ","); !strings.Contains(got, "etcd") || !strings.Contains(got, "kube-apiserver") {
				t.Errorf("environment %d: child processes = %q, want etcd and kube-apiserver", i, got)
			}
		}

		start := time.Now()
		if err := env.Stop(); err != nil {
			t.Fatalf("environment %d: Stop: %v", i, err)
		}
		t.Logf("environment %d: stopped in %v", i, time.Since(start).Round(time.Millisecond))

		for _, p := range procs {
			if !processGone(p.pid) {
				t.Errorf("environment %d: %s (pid %d) still runs after Stop", i, p.comm, p.pid)
			}
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("environment %d: folder %s after Stop: %v, want it removed", i, dir, err)
		}
		if err := env.Stop(); err != nil {
			t.Errorf("environment %d: second Stop = %v, want nil", i, err)
		}
		if _, err := env.Start(ctx); !errors.Is(err, envtest.ErrStopped) {
			t.Errorf("environment %d: Start after Stop = %v, want ErrStopped", i, err)
		}
		if env.Config() != nil || env.Dir() != "" || env.APIServerURL() != "" {
			t.Errorf("environment %d: accessors not cleared by Stop", i)
		}
	}
}
