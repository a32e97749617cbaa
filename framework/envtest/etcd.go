package envtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// etcdMemberName names the single etcd member (etcd warns about its default name).
const etcdMemberName = "converge-envtest"

// startEtcd starts etcd on two free loopback ports (client and peer) with its data in
// dir/etcd and waits until it is healthy.
func (lp *localPlane) startEtcd(ctx context.Context, path string, extra []string) error {
	dataDir := filepath.Join(lp.dir, "etcd")
	var clientURL string
	build := func() (*process, error) {
		// A failed attempt may have initialized the data folder for its peer URL.
		if err := os.RemoveAll(dataDir); err != nil {
			return nil, fmt.Errorf("clear etcd data folder: %w", err)
		}
		if err := os.Mkdir(dataDir, 0o700); err != nil {
			return nil, fmt.Errorf("create etcd data folder: %w", err)
		}
		ports, err := freePorts(2)
		if err != nil {
			return nil, err
		}
		clientURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		args := mergeFlags([]string{
			"--name=" + etcdMemberName,
			"--data-dir=" + dataDir,
			"--listen-client-urls=" + clientURL,
			"--advertise-client-urls=" + clientURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=" + etcdMemberName + "=" + peerURL,
			"--initial-cluster-state=new",
			"--unsafe-no-fsync=true", // the data is thrown away: durability buys nothing
		}, extra)
		return lp.newProcess(Etcd, path, args), nil
	}
	ready := func(ctx context.Context) error { return etcdHealthy(ctx, clientURL) }
	p, err := startWithRetry(ctx, build, ready)
	lp.etcd = p
	if err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	lp.etcdURL = clientURL
	return nil
}

// etcdHealthy checks etcd's /health endpoint.
func etcdHealthy(ctx context.Context, clientURL string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientURL+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"health":"true"`)) {
		return fmt.Errorf("GET %s/health: %s: %s", clientURL, resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// CompactEtcd compacts etcd's history at its current revision, physically, and returns
// that revision. kube-apiserver then answers a watch or list from an older resource
// version with 410 Gone, once it reaches etcd: the watch cache (on unless kube-apiserver
// runs with --watch-cache=false) keeps serving recent history.
//
// It talks to etcd's JSON gateway, POST /v3/kv/range for the revision and POST
// /v3/kv/compaction, so no etcd client is needed. It returns ErrNotLocal for an existing
// cluster.
func (e *Environment) CompactEtcd(ctx context.Context) (revision int64, err error) {
	e.lifecycle.Lock()
	defer e.lifecycle.Unlock()
	lp, err := e.localStarted()
	if err != nil {
		return 0, err
	}
	// Any key will do: every response header carries the store's current revision.
	var rangeResp struct {
		Header struct {
			Revision json.Number `json:"revision"`
		} `json:"header"`
	}
	if err := etcdPost(ctx, lp.etcdURL, "/v3/kv/range", map[string]any{"key": "Lw=="}, &rangeResp); err != nil {
		return 0, fmt.Errorf("envtest: compact etcd: read revision: %w", err)
	}
	revision, err = strconv.ParseInt(rangeResp.Header.Revision.String(), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("envtest: compact etcd: revision %q: %w", rangeResp.Header.Revision, err)
	}
	body := map[string]any{"revision": strconv.FormatInt(revision, 10), "physical": true}
	if err := etcdPost(ctx, lp.etcdURL, "/v3/kv/compaction", body, nil); err != nil {
		return 0, fmt.Errorf("envtest: compact etcd at revision %d: %w", revision, err)
	}
	return revision, nil
}

// etcdPost posts in as JSON to etcd's gateway and decodes the answer into out (when not
// nil). An error answer becomes an error with etcd's message.
func etcdPost(ctx context.Context, baseURL, path string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("POST %s: read answer: %w", path, err)
	}
	var failure struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if resp.StatusCode != http.StatusOK {
		_ = json.Unmarshal(body, &failure)
		msg := failure.Message
		if msg == "" {
			msg = failure.Error
		}
		if msg == "" {
			msg = strings.TrimSpace(string(body))
		}
		return fmt.Errorf("POST %s: %s: %s", path, resp.Status, msg)
	}
	if out == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("POST %s: decode answer: %w", path, err)
	}
	return nil
}
