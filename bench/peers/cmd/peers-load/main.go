// peers-load: the writes `make bench-peers` makes, the same for luna and the
// two peers, over keep-alive connections authenticated by KUBECONFIG.
//
//	peers-load patch NS OBJECTS RATE SECONDS COUNT CONNS
//	    merge-PATCHes ConfigMaps NS/cm-000000 … round-robin, each with
//	    {"data":{"seq":"<n>","t":"<wall-clock send time, s>"}}; RATE > 0:
//	    at RATE writes/s for SECONDS; RATE = 0: COUNT writes as fast as CONNS
//	    connections take them.  Prints
//	    `load writes=W seconds=S write_rate=R errors=E`.
//	peers-load mark NS NAME KEY VALUE
//	    one merge-PATCH of ConfigMap NS/NAME setting data.KEY = VALUE.
//	peers-load faults SPEC
//	    PUT SPEC to the dev server's /luna/v1/faults (needs --admin).
//	peers-load relist NS NAME VALUE
//	    makes the dev server's watchers relist: sets the faults
//	    watch-close-after=1 (the open watch ends after the next event) and
//	    gone=1 (the watch that follows gets 410 Gone), patches ConfigMap
//	    NS/NAME's data.phase to VALUE (that event), and clears the faults as
//	    soon as the 410 has been served, so the relist itself (a LIST, or a
//	    watch with sendInitialEvents) is not cut.  Prints
//	    `load relist gone_s=S` (patch → 410 served).
//	peers-load create NS CONFIGMAPS ITEMS
//	    creates namespace NS, the Item CRD (bench.luna.dev/v1, status
//	    subresource), CONFIGMAPS ConfigMaps cm-NNNNNN, `marker`, `report`
//	    and ITEMS Items item-NNNNNN, as bench/peers.lua seeds the dev server.
//	peers-load delete NS
//	    deletes namespace NS (and so what create made in it).
//	peers-load webhook URL CA PID RATE WARMUP SECONDS CONNS
//	    admission requests to a webhook server (webhook.go says which and how).
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

var (
	client *http.Client
	host   string
)

func die(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "peers-load: "+format+"\n", args...)
	os.Exit(2)
}

func num(s string) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		die("%q is not a count", s)
	}
	return v
}

// send makes one request; returns the status (0 on a transport error).
func send(method, path, ctype string, body []byte) (int, string) {
	req, err := http.NewRequest(method, host+path, bytes.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(text)
}

const mergePatch = "application/merge-patch+json"

func patch(ns string, objects, rate, seconds, count, conns int64) {
	jobs := make(chan int64, conns)
	var errors atomic.Int64
	var wg sync.WaitGroup
	for i := int64(0); i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range jobs {
				body := fmt.Sprintf(`{"data":{"seq":"%d","t":"%.9f"}}`, n,
					float64(time.Now().UnixNano())/1e9)
				path := fmt.Sprintf("/api/v1/namespaces/%s/configmaps/cm-%06d", ns, n%objects)
				if st, _ := send("PATCH", path, mergePatch, []byte(body)); st != 200 {
					errors.Add(1)
				}
			}
		}()
	}
	t0 := time.Now()
	var n int64
	if rate > 0 {
		end := t0.Add(time.Duration(seconds) * time.Second)
		for now := time.Now(); now.Before(end); now = time.Now() {
			due := int64(now.Sub(t0).Seconds() * float64(rate))
			// Behind (the server takes fewer): send as fast as the
			// connections take writes, but never past the window's end.
			for ; n < due && time.Now().Before(end); n++ {
				jobs <- n
			}
			time.Sleep(200 * time.Microsecond)
		}
	} else {
		for ; n < count; n++ {
			jobs <- n
		}
	}
	close(jobs)
	wg.Wait()
	secs := time.Since(t0).Seconds()
	fmt.Printf("load writes=%d seconds=%.3f write_rate=%.0f errors=%d\n", n, secs, float64(n)/secs, errors.Load())
}

func must(method, path, ctype, body string, ok ...int) {
	st, text := send(method, path, ctype, []byte(body))
	for _, o := range ok {
		if st == o {
			return
		}
	}
	die("%s %s: %d %s", method, path, st, text)
}

func relist(ns, name, value string) {
	must("PUT", "/luna/v1/faults", "text/plain", "watch-close-after=1,gone=1", 200, 204)
	t0 := time.Now()
	must("PATCH", "/api/v1/namespaces/"+ns+"/configmaps/"+name, mergePatch,
		fmt.Sprintf(`{"data":{"phase":%q}}`, value), 200)
	for {
		st, text := send("GET", "/luna/v1/faults", "", nil)
		if st != 200 {
			die("GET /luna/v1/faults: %d %s", st, text)
		}
		var f struct {
			Gone int `json:"gone"`
		}
		if err := json.Unmarshal([]byte(text), &f); err != nil {
			die("GET /luna/v1/faults: %v", err)
		}
		if f.Gone == 0 {
			break
		}
		if time.Since(t0) > 60*time.Second {
			die("no watch came back within 60 s to get its 410")
		}
		time.Sleep(200 * time.Microsecond)
	}
	gone := time.Since(t0).Seconds()
	must("PUT", "/luna/v1/faults", "text/plain", "", 200, 204)
	fmt.Printf("load relist gone_s=%.6f\n", gone)
}

const crd = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
"metadata":{"name":"items.bench.luna.dev"},"spec":{"group":"bench.luna.dev","scope":"Namespaced",
"names":{"kind":"Item","listKind":"ItemList","plural":"items","singular":"item"},
"versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},
"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`

// create makes the objects in parallel over 16 connections.
func create(ns string, cms, items int64) {
	must("POST", "/api/v1/namespaces", "application/json",
		fmt.Sprintf(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%q}}`, ns), 201, 409)
	if items > 0 {
		must("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/json", crd, 201, 409)
		for i := 0; ; i++ {
			st, _ := send("GET", "/apis/bench.luna.dev/v1/namespaces/"+ns+"/items", "", nil)
			if st == 200 {
				break
			}
			if i > 600 {
				die("the Item CRD is not served")
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	type obj struct{ path, body string }
	jobs := make(chan obj, 64)
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range jobs {
				must("POST", o.path, "application/json", o.body, 201, 409)
			}
		}()
	}
	cmPath := "/api/v1/namespaces/" + ns + "/configmaps"
	for _, name := range []string{"marker", "report"} {
		jobs <- obj{cmPath, fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":%q},"data":{"phase":"","seq":"0"}}`, name, ns)}
	}
	for i := int64(0); i < cms; i++ {
		jobs <- obj{cmPath, configMap(ns, i)}
	}
	itemPath := "/apis/bench.luna.dev/v1/namespaces/" + ns + "/items"
	for i := int64(0); i < items; i++ {
		jobs <- obj{itemPath, item(ns, i)}
	}
	close(jobs)
	wg.Wait()
	fmt.Printf("load created configmaps=%d items=%d\n", cms, items)
}

// configMap and item are the objects' JSON; bench/peers.lua's seed writes
// the same.
func configMap(ns string, i int64) string {
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%06d","namespace":%q,`+
		`"labels":{"app":"peers"}},"data":{"seq":"0","t":"0","config":"value-%d"}}`, i, ns, i)
}

func item(ns string, i int64) string {
	return fmt.Sprintf(`{"apiVersion":"bench.luna.dev/v1","kind":"Item","metadata":{"name":"item-%06d",`+
		`"namespace":%q},"spec":{"size":%d}}`, i, ns, i)
}

func main() {
	if len(os.Args) < 2 {
		die("usage: peers-load patch|mark|relist|faults|create|delete|webhook ARGS (see the source's comment)")
	}
	if a := os.Args[2:]; os.Args[1] == "webhook" && len(a) == 7 {
		webhookLoad(a[0], a[1], a[2], num(a[3]), num(a[4]), num(a[5]), num(a[6]))
		return
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		die("kubeconfig: %v", err)
	}
	client, err = rest.HTTPClientFor(cfg)
	if err != nil {
		die("client: %v", err)
	}
	host = cfg.Host
	a := os.Args[2:]
	switch {
	case os.Args[1] == "patch" && len(a) == 6:
		patch(a[0], num(a[1]), num(a[2]), num(a[3]), num(a[4]), num(a[5]))
	case os.Args[1] == "mark" && len(a) == 4:
		must("PATCH", "/api/v1/namespaces/"+a[0]+"/configmaps/"+a[1], mergePatch,
			fmt.Sprintf(`{"data":{%q:%q}}`, a[2], a[3]), 200)
	case os.Args[1] == "faults" && len(a) == 1:
		must("PUT", "/luna/v1/faults", "text/plain", a[0], 200, 204)
	case os.Args[1] == "relist" && len(a) == 3:
		relist(a[0], a[1], a[2])
	case os.Args[1] == "delete" && len(a) == 1:
		must("DELETE", "/api/v1/namespaces/"+a[0], "", "", 200, 202, 404)
	case os.Args[1] == "create" && len(a) == 3:
		create(a[0], num(a[1]), num(a[2]))
	default:
		die("usage: peers-load patch|mark|relist|faults|create|delete|webhook ARGS (see the source's comment)")
	}
}
