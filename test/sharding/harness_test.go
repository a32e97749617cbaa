package sharding_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/test/sharding/report"
)

// memberProcess is one running testdata/member.
type memberProcess struct {
	identity string
	cmd      *exec.Cmd
	stderr   *testenv.Buffer
	exited   chan struct{}
	exitErr  error
}

// startMember runs testdata/member as identity, reporting to ref.
func startMember(t *testing.T, kubeconfig, ns, identity string, ref *referee, extra ...string) *memberProcess {
	t.Helper()
	p := &memberProcess{identity: identity, stderr: &testenv.Buffer{}, exited: make(chan struct{})}
	args := append([]string{"--kubeconfig=" + kubeconfig, "--namespace=" + ns, "--identity=" + identity, "--referee=" + ref.url}, extra...)
	p.cmd = exec.Command(memberBin, args...)
	p.cmd.Stderr = p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.exitErr = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("member %s's log (tail):\n%s", p.identity, tail(p.stderr.String(), 30))
		}
	})
	return p
}

// signal sends sig to p.
func (p *memberProcess) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to member %s: %v", sig, p.identity, err)
	}
}

// wait waits for p to exit, for at most a minute, and returns its error.
func (p *memberProcess) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-p.exited:
		return p.exitErr
	case <-time.After(time.Minute):
		t.Fatalf("member %s did not exit within a minute; its log:\n%s", p.identity, tail(p.stderr.String(), 30))
		return nil
	}
}

// alive fails t when p exited on its own.
func (p *memberProcess) alive(t *testing.T) {
	t.Helper()
	select {
	case <-p.exited:
		t.Fatalf("member %s exited (%v); its log:\n%s", p.identity, p.exitErr, tail(p.stderr.String(), 30))
	default:
	}
}

// tail returns the last n lines of s, or everything from the first data
// race report on, which the race detector writes at once and which is
// longer.
func tail(s string, n int) string {
	if i := strings.Index(s, "WARNING: DATA RACE"); i >= 0 {
		return s[i:]
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// objectName is the name of the i-th object.
func objectName(i int) string { return fmt.Sprintf("obj-%04d", i) }

// createObjects creates n ConfigMaps with data.v "0", already marked as
// reconciled at "0", eight at a time.
func createObjects(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string, n int) {
	t.Helper()
	work := make(chan int)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				cm := &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: objectName(i), Annotations: map[string]string{report.ObservedAnnotation: "0"}},
					Data:       map[string]string{"v": "0"},
				}
				if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("create the objects: %v", err)
	default:
	}
}

// updater keeps changing data.v of random objects at a fixed rate until
// stopped; last is each object's last value, and what its final
// reconcile must have written.
type updater struct {
	stopOnce sync.Once
	stopCh   chan struct{}
	done     chan struct{}
	// sending is read-locked around each change sent, and write-locked
	// while the updater is paused (see pause).
	sending sync.RWMutex

	mu sync.Mutex
	// last is the value each object was last set to; changes and failures
	// count the updates; mu guards them.
	last     []int
	lastAt   []time.Time
	changes  int
	failures int
	// log is every change that succeeded.
	log []change

	// cs and target are what the updater changes (see startUpdaterOf).
	cs     kubernetes.Interface
	target func(i int) (ns, name, key string)
}

// change is one update: the object, the value it set, and when the API
// server answered.
type change struct {
	name  string
	value int
	at    time.Time
}

func startUpdater(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string, n int, rate float64) *updater {
	t.Helper()
	return startUpdaterOf(ctx, t, cs, n, rate, func(i int) (string, string, string) { return ns, objectName(i), objectName(i) })
}

// startUpdaterOf is startUpdater of n ConfigMaps named by target: the
// i-th object's namespace and name, and the key its changes are logged
// under (what the members report as the reconcile's key).
func startUpdaterOf(ctx context.Context, t *testing.T, cs kubernetes.Interface, n int, rate float64, target func(i int) (ns, name, key string)) *updater {
	t.Helper()
	u := &updater{stopCh: make(chan struct{}), done: make(chan struct{}), last: make([]int, n), lastAt: make([]time.Time, n), cs: cs, target: target}
	go func() {
		defer close(u.done)
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
		for {
			select {
			case <-u.stopCh:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			u.sending.RLock()
			u.change(ctx, rand.IntN(n))
			u.sending.RUnlock()
		}
	}()
	t.Cleanup(u.stop)
	return u
}

// change sets the i-th object's data.v to one more than its last value,
// and records the change or its failure. Changes of one object must not
// run at once.
func (u *updater) change(ctx context.Context, i int) {
	u.mu.Lock()
	v := u.last[i] + 1
	u.mu.Unlock()
	ns, name, key := u.target(i)
	patch := fmt.Sprintf(`{"data":{"v":%q}}`, strconv.Itoa(v))
	_, err := u.cs.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	u.mu.Lock()
	defer u.mu.Unlock()
	if err != nil {
		u.failures++
		return
	}
	u.last[i] = v
	u.lastAt[i] = time.Now()
	u.changes++
	u.log = append(u.log, change{name: key, value: v, at: u.lastAt[i]})
}

// changeAll changes every object once, while the updater is paused.
func (u *updater) changeAll(ctx context.Context) {
	defer u.pause()()
	for i := range u.last {
		u.change(ctx, i)
	}
}

// pause waits for the change being sent, if any, and holds the next ones
// until the function it returns is called: no change is in flight while
// the API server is away, where its outcome could not be told.
func (u *updater) pause() (resume func()) {
	u.sending.Lock()
	return u.sending.Unlock
}

func (u *updater) stop() {
	u.stopOnce.Do(func() { close(u.stopCh) })
	<-u.done
}

// unreconciled lists the objects whose annotation does not hold their
// last value, and counts the objects never changed by u.
func (u *updater) unreconciled(ctx context.Context, cs kubernetes.Interface, ns string) ([]string, error) {
	list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	got := map[string]*corev1.ConfigMap{}
	for i := range list.Items {
		got[list.Items[i].Name] = &list.Items[i]
	}
	var out []string
	for i, v := range u.last {
		cm := got[objectName(i)]
		switch want := strconv.Itoa(v); {
		case cm == nil:
			out = append(out, objectName(i)+" (missing)")
		case cm.Data["v"] != want:
			out = append(out, fmt.Sprintf("%s (data.v %q, the updater last set %q)", cm.Name, cm.Data["v"], want))
		case cm.Annotations[report.ObservedAnnotation] != want:
			out = append(out, fmt.Sprintf("%s (reconciled %q, last change %q at %s)", cm.Name, cm.Annotations[report.ObservedAnnotation], want, u.lastAt[i].Format("15:04:05.000")))
		}
	}
	return out, nil
}

// eventually polls cond every interval until it is true, and returns how
// long that took; after timeout it fails t with cond's last message.
func eventually(t *testing.T, timeout, interval time.Duration, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		ok, what := cond()
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("not within %v: %s", timeout, what)
		}
		<-tick.C
	}
}
