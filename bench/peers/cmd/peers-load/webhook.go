// peers-load webhook: the admission load of bench/peers.lua's webhook phase,
// the same for luna and the controller-runtime peer.
//
//	peers-load webhook URL CA PID RATE WARMUP SECONDS CONNS
//	    POSTs AdmissionReview v1 requests for bench.luna.dev/v1 Items to
//	    URL/mutate/items.default.bench.luna.dev and
//	    URL/validate/items.validate.bench.luna.dev, alternately, over HTTPS
//	    (the server's certificate signed by the PEM file CA; HTTP/1.1, CONNS
//	    keep-alive connections), open loop: request i is due at
//	    i / RATE s from the start, whatever the answers before it did, and
//	    its latency runs from that due time to its answer's last byte, so a
//	    stall of the server delays and counts every request due during it
//	    (no coordinated omission).  The first WARMUP s of requests are sent
//	    but not counted; then SECONDS s are.  Every answer is checked
//	    against the rules both subjects implement (bench/peers.lua
//	    M.webhooks, peer-controller-runtime/webhooks.go): the uid, allowed,
//	    a denial's code 403, and the object a mutating answer's JSON patch
//	    makes.  PID is the subject's process: its CPU time (user + system,
//	    /proc/PID/stat) is read when the first counted request is due and
//	    after the last answer.  Prints
//	    `load webhook requests=N seconds=S rate=R p50_ms=A p99_ms=B max_ms=C
//	    cpu_s=U errors=E` (and the first error on stderr).
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	validatePath = "/validate/items.validate.bench.luna.dev"
	mutatePath   = "/mutate/items.default.bench.luna.dev"
	sizeClass    = "bench.luna.dev/size-class"
)

// expectation is what a right answer says.
type expectation struct {
	allowed bool
	mutate  bool
	mode    string // mutate: spec.mode of the patched object
	class   string // mutate: its size-class label
}

// itemJSON is an Item as kube-apiserver sends it to admission: server-set
// metadata, one managedFields entry, the spec.
func itemJSON(i int64, size int64, mode, class string) string {
	labels := `"app":"peers"`
	if class != "" {
		labels += fmt.Sprintf(`,%q:%q`, sizeClass, class)
	}
	spec := fmt.Sprintf(`"size":%d`, size)
	if mode != "" {
		spec += fmt.Sprintf(`,"mode":%q`, mode)
	}
	return fmt.Sprintf(`{"apiVersion":"bench.luna.dev/v1","kind":"Item","metadata":{"name":"item-%06d",`+
		`"namespace":"peers","uid":"6a1b0c9e-0000-4000-8000-%012d","generation":1,`+
		`"creationTimestamp":"2026-01-01T00:00:00Z","labels":{%s},"managedFields":[{"manager":"kubectl",`+
		`"operation":"Update","apiVersion":"bench.luna.dev/v1","time":"2026-01-01T00:00:00Z",`+
		`"fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:app":{}}},`+
		`"f:spec":{".":{},"f:size":{}}}}]},"spec":{%s}}`, i, i, labels, spec)
}

func classOf(size int64) string {
	if size >= 1000 {
		return "large"
	}
	return "small"
}

// review is request n: its path, body and the right answer.  Even n are
// mutating, odd validating; (n/2) % 10 picks the case.
func review(n int64) (string, []byte, expectation) {
	k := (n / 2) % 10
	size := n % 2000
	op, obj, old := "CREATE", "", ""
	var e expectation
	path := validatePath
	if n%2 == 0 {
		path, e.mutate, e.allowed = mutatePath, true, true
		switch {
		case k < 6: // defaults both
			obj, e.mode, e.class = itemJSON(n, size, "", ""), "safe", classOf(size)
		case k < 8: // mode given: the label only
			obj, e.mode, e.class = itemJSON(n, size, "fast", ""), "fast", classOf(size)
		default: // already defaulted: no change
			op = "UPDATE"
			obj = itemJSON(n, size, "safe", classOf(size))
			old = itemJSON(n, size+1, "safe", classOf(size))
			e.mode, e.class = "safe", classOf(size)
		}
	} else {
		switch k {
		case 6: // size changed
			op, obj, old, e.allowed = "UPDATE", itemJSON(n, size, "safe", "small"), itemJSON(n, size+1, "safe", "small"), true
		case 7: // mode set for the first time
			op, obj, old, e.allowed = "UPDATE", itemJSON(n, size, "fast", "small"), itemJSON(n, size, "", "small"), true
		case 8: // mode changed: denied
			op, obj, old = "UPDATE", itemJSON(n, size, "fast", "small"), itemJSON(n, size, "safe", "small")
		case 9: // size out of range: denied
			obj = itemJSON(n, 2000000, "safe", "large")
		default:
			obj, e.allowed = itemJSON(n, size, "safe", classOf(size)), true
		}
	}
	oldField := ""
	if old != "" {
		oldField = `,"oldObject":` + old
	}
	body := fmt.Sprintf(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{`+
		`"uid":"0b5e3c2a-0000-4000-8000-%012d","kind":{"group":"bench.luna.dev","version":"v1","kind":"Item"},`+
		`"resource":{"group":"bench.luna.dev","version":"v1","resource":"items"},`+
		`"requestKind":{"group":"bench.luna.dev","version":"v1","kind":"Item"},`+
		`"requestResource":{"group":"bench.luna.dev","version":"v1","resource":"items"},`+
		`"name":"item-%06d","namespace":"peers","operation":%q,"userInfo":{"username":"kubernetes-admin",`+
		`"groups":["kubeadm:cluster-admins","system:authenticated"]},"object":%s%s,"dryRun":false,`+
		`"options":{"apiVersion":"meta.k8s.io/v1","kind":"%sOptions"}}}`,
		n, n, op, obj, oldField, map[string]string{"CREATE": "Create", "UPDATE": "Update"}[op])
	return path, []byte(body), e
}

// check says what is wrong with an answer, or "".
func check(n int64, body []byte, e expectation, reqBody []byte) string {
	var rv struct {
		Response struct {
			UID     string `json:"uid"`
			Allowed bool   `json:"allowed"`
			Status  *struct {
				Code int `json:"code"`
			} `json:"status"`
			Patch     []byte `json:"patch"`
			PatchType string `json:"patchType"`
		} `json:"response"`
	}
	if err := json.Unmarshal(body, &rv); err != nil {
		return fmt.Sprintf("request %d: answer is not JSON: %v: %.200s", n, err, body)
	}
	r := rv.Response
	if r.UID != fmt.Sprintf("0b5e3c2a-0000-4000-8000-%012d", n) {
		return fmt.Sprintf("request %d: uid %q", n, r.UID)
	}
	if r.Allowed != e.allowed {
		return fmt.Sprintf("request %d: allowed=%v, want %v: %.300s", n, r.Allowed, e.allowed, body)
	}
	if !r.Allowed && (r.Status == nil || r.Status.Code != 403) {
		return fmt.Sprintf("request %d: a denial without code 403: %.300s", n, body)
	}
	if !e.mutate {
		if len(r.Patch) > 0 {
			return fmt.Sprintf("request %d: a validating answer with a patch", n)
		}
		return ""
	}
	var req struct {
		Request struct {
			Object any `json:"object"`
		} `json:"request"`
	}
	_ = json.Unmarshal(reqBody, &req)
	obj := req.Request.Object
	if len(r.Patch) > 0 {
		if r.PatchType != "JSONPatch" {
			return fmt.Sprintf("request %d: patchType %q", n, r.PatchType)
		}
		var ops []struct {
			Op    string `json:"op"`
			Path  string `json:"path"`
			Value any    `json:"value"`
		}
		if err := json.Unmarshal(r.Patch, &ops); err != nil {
			return fmt.Sprintf("request %d: patch: %v", n, err)
		}
		for _, op := range ops {
			var err error
			if obj, err = applyOp(obj, op.Op, op.Path, op.Value); err != nil {
				return fmt.Sprintf("request %d: patch op %s %s: %v", n, op.Op, op.Path, err)
			}
		}
	}
	m, _ := obj.(map[string]any)
	spec, _ := m["spec"].(map[string]any)
	meta, _ := m["metadata"].(map[string]any)
	labels, _ := meta["labels"].(map[string]any)
	if spec["mode"] != e.mode || labels[sizeClass] != e.class {
		return fmt.Sprintf("request %d: patched to mode=%v class=%v, want %s %s", n, spec["mode"],
			labels[sizeClass], e.mode, e.class)
	}
	return ""
}

// applyOp applies one RFC 6902 add, replace or remove to doc (decoded JSON).
func applyOp(doc any, op, path string, value any) (any, error) {
	if path == "" {
		if op == "remove" {
			return nil, nil
		}
		return value, nil
	}
	if path[0] != '/' {
		return nil, fmt.Errorf("bad path")
	}
	parts := strings.Split(path[1:], "/")
	for i := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(parts[i], "~1", "/"), "~0", "~")
	}
	var set func(node any, parts []string) (any, error)
	set = func(node any, parts []string) (any, error) {
		key := parts[0]
		last := len(parts) == 1
		switch v := node.(type) {
		case map[string]any:
			if last {
				switch op {
				case "add":
					v[key] = value
				case "replace", "remove":
					if _, ok := v[key]; !ok {
						return nil, fmt.Errorf("no %q", key)
					}
					if op == "remove" {
						delete(v, key)
					} else {
						v[key] = value
					}
				default:
					return nil, fmt.Errorf("op %q", op)
				}
				return v, nil
			}
			child, err := set(v[key], parts[1:])
			v[key] = child
			return v, err
		case []any:
			i := len(v)
			if key != "-" {
				var err error
				if i, err = strconv.Atoi(key); err != nil || i < 0 || i > len(v) {
					return nil, fmt.Errorf("bad index %q", key)
				}
			}
			if last {
				switch op {
				case "add":
					v = append(v[:i], append([]any{value}, v[i:]...)...)
				case "replace":
					v[i] = value
				case "remove":
					v = append(v[:i], v[i+1:]...)
				default:
					return nil, fmt.Errorf("op %q", op)
				}
				return v, nil
			}
			child, err := set(v[i], parts[1:])
			v[i] = child
			return v, err
		}
		return nil, fmt.Errorf("no parent for %q", key)
	}
	return set(doc, parts)
}

// procCPU is the process's user + system time, s (USER_HZ is 100 on
// Linux whatever the kernel's HZ).
func procCPU(pid string) float64 {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		die("/proc/%s/stat: %v", pid, err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (u + st) / 100
}

func webhookLoad(url, caFile, pid string, rate, warmup, seconds, conns int64) {
	if rate <= 0 || seconds <= 0 || conns <= 0 {
		die("webhook: RATE, SECONDS and CONNS must be positive")
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		die("webhook: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		die("webhook: no certificate in %s", caFile)
	}
	hc := &http.Client{Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool},
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{}, // HTTP/1.1
		MaxIdleConnsPerHost: int(conns), MaxConnsPerHost: int(conns),
		DisableCompression: true,
	}, Timeout: 30 * time.Second}
	procCPU(pid)

	type job struct {
		n   int64
		due time.Time
	}
	total, warmN := rate*(warmup+seconds), rate*warmup
	jobs := make(chan job, total)
	lat := make([]float64, total)
	var mu sync.Mutex
	var errs int64
	var firstErr string
	fail := func(s string) {
		mu.Lock()
		errs++
		if firstErr == "" {
			firstErr = s
		}
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for c := int64(0); c < conns; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				path, body, e := review(j.n)
				resp, err := hc.Post(url+path, "application/json", bytes.NewReader(body))
				if err != nil {
					fail(fmt.Sprintf("request %d: %v", j.n, err))
					continue
				}
				text, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				lat[j.n] = time.Since(j.due).Seconds()
				if resp.StatusCode != 200 {
					fail(fmt.Sprintf("request %d: HTTP %d: %.300s", j.n, resp.StatusCode, text))
				} else if msg := check(j.n, text, e, body); msg != "" {
					fail(msg)
				}
			}
		}()
	}
	var cpu0 float64
	var tw time.Time
	t0 := time.Now()
	for n := int64(0); n < total; n++ {
		due := t0.Add(time.Duration(float64(n) * 1e9 / float64(rate)))
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		if n == warmN {
			cpu0, tw = procCPU(pid), time.Now()
		}
		jobs <- job{n, due}
	}
	close(jobs)
	wg.Wait()
	cpu := procCPU(pid) - cpu0
	secs := time.Since(tw).Seconds()
	v := append([]float64(nil), lat[warmN:]...)
	sort.Float64s(v)
	q := func(f float64) float64 {
		i := int(math.Ceil(f*float64(len(v)))) - 1
		if i < 0 {
			i = 0
		}
		return v[i] * 1e3
	}
	if firstErr != "" {
		fmt.Fprintf(os.Stderr, "peers-load webhook: %d errors; the first: %s\n", errs, firstErr)
	}
	fmt.Printf("load webhook requests=%d seconds=%.3f rate=%.0f p50_ms=%.3f p99_ms=%.3f max_ms=%.3f cpu_s=%.3f errors=%d\n",
		len(v), secs, float64(len(v))/secs, q(0.5), q(0.99), v[len(v)-1]*1e3, cpu, errs)
}
