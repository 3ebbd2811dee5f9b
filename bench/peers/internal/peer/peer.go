// Package peer is what the two peer controllers share with each other and,
// by contract, with the Lua controller bench/peers.lua drives luna with: the
// options (environment), what a reconcile does, and the lines printed.  The
// driver reads the lines; each must mean the same thing for all three.
//
// Environment:
//
//	KUBECONFIG        the cluster (required)
//	PEERS_MODE        configmaps (a trivial reconcile: one lister get),
//	                  status (one status write per reconcile, on Items) or
//	                  webhooks (configmaps, and admission webhooks for Items:
//	                  the peer-controller-runtime only, webhooks.go)
//	PEERS_WEBHOOK_CERT_DIR  webhooks mode: tls.crt and tls.key to serve with
//	PEERS_NAMESPACE   the namespace watched
//	PEERS_OBJECTS     the objects the initial reconciles cover (cm-* or item-*)
//	PEERS_RUN         this run's token, written to status.run (status mode)
//	PEERS_WORKERS     reconciles in flight at most (default 4)
//
// Lines (stdout):
//
//	peer synced                                       the cache holds the LIST
//	peer dispatched reconciles=N seconds=S cpu_s=C    the N-th initial reconcile
//	                                                  of a cm-* object ended
//	peer marker phase=P                               `marker` reconciled with a
//	                                                  new data.phase
//	peer e2e samples=N e2e_p50_ms=A e2e_p99_ms=B      `report` reconciled with
//	                                                  data.seq not "0": the latencies
//	                                                  since the last one
//	peer status writes=N seconds=S cpu_s=C            the N-th status write ended
//	peer webhooks serving port=P                      webhooks mode: the server
//	                                                  answers TLS on 127.0.0.1:P
//
// seconds are wall-clock, from the first reconcile's start; cpu_s is this
// process's CPU time (user + system, every thread) over the same span.
package peer

import (
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Options are the environment's settings.
type Options struct {
	Mode      string
	Namespace string
	Objects   int64
	Run       string
	Workers   int
}

// Load reads the options and the kubeconfig; it exits on bad input.
func Load() (Options, *rest.Config) {
	o := Options{Mode: os.Getenv("PEERS_MODE"), Namespace: os.Getenv("PEERS_NAMESPACE"),
		Run: os.Getenv("PEERS_RUN"), Workers: 4}
	if o.Mode != "configmaps" && o.Mode != "status" && o.Mode != "webhooks" {
		Die("PEERS_MODE must be configmaps, status or webhooks, not %q", o.Mode)
	}
	if o.Namespace == "" {
		Die("PEERS_NAMESPACE is not set")
	}
	n, err := strconv.ParseInt(os.Getenv("PEERS_OBJECTS"), 10, 64)
	if err != nil || n <= 0 {
		Die("PEERS_OBJECTS must be a positive integer")
	}
	o.Objects = n
	if w := os.Getenv("PEERS_WORKERS"); w != "" {
		v, err := strconv.Atoi(w)
		if err != nil || v <= 0 {
			Die("PEERS_WORKERS must be a positive integer")
		}
		o.Workers = v
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		Die("kubeconfig: %v", err)
	}
	// No client-side rate limit: luna has none on its API calls, and the
	// status phase would otherwise measure client-go's default 5 QPS.
	cfg.QPS = -1
	return o, cfg
}

// Die prints to stderr and exits 2.
func Die(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "peer: "+format+"\n", args...)
	os.Exit(2)
}

// CPU is this process's CPU time so far, seconds.
func CPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// Wall is the wall clock in seconds, as the load generator stamps writes.
func Wall() float64 {
	return float64(time.Now().UnixNano()) / 1e9
}

var out sync.Mutex

// Line prints one line to stdout, whole.
func Line(format string, args ...any) {
	out.Lock()
	fmt.Fprintf(os.Stdout, format+"\n", args...)
	out.Unlock()
}

// Stats counts what the reconciles did; safe from every worker.
type Stats struct {
	mu        sync.Mutex
	objects   int64
	started   bool
	t0, cpu0  float64
	done      int64
	writes    int64
	samples   []float64
	lastPhase string
}

// NewStats expects `objects` initial reconciles (or status writes).
func NewStats(objects int64) *Stats { return &Stats{objects: objects} }

// Synced prints the synced line.
func Synced() { Line("peer synced") }

// Begin is called at the start of every reconcile.
func (s *Stats) Begin() {
	s.mu.Lock()
	if !s.started {
		s.started, s.t0, s.cpu0 = true, time.Since(epoch).Seconds(), CPU()
	}
	s.mu.Unlock()
}

var epoch = time.Now()

// Reconciled counts the end of a reconcile of an object named like the
// initial objects; prints the dispatched line at the N-th.
func (s *Stats) Reconciled() {
	s.mu.Lock()
	s.done++
	if s.done == s.objects {
		Line("peer dispatched reconciles=%d seconds=%.6f cpu_s=%.6f", s.done,
			time.Since(epoch).Seconds()-s.t0, CPU()-s.cpu0)
	}
	s.mu.Unlock()
}

// Wrote counts a status write that ended; prints the status line at the N-th.
func (s *Stats) Wrote() {
	s.mu.Lock()
	s.writes++
	if s.writes == s.objects {
		Line("peer status writes=%d seconds=%.6f cpu_s=%.6f", s.writes,
			time.Since(epoch).Seconds()-s.t0, CPU()-s.cpu0)
	}
	s.mu.Unlock()
}

// Special handles the driver's two control objects; true if name was one.
// data is the object's data (nil if it has none).
func (s *Stats) Special(name string, data map[string]string) bool {
	switch name {
	case "report":
		if data["seq"] == "0" || data["seq"] == "" {
			return true // as seeded: no report asked for yet
		}
		s.mu.Lock()
		v := s.samples
		s.samples = nil
		s.mu.Unlock()
		sort.Float64s(v)
		Line("peer e2e samples=%d e2e_p50_ms=%.3f e2e_p99_ms=%.3f", len(v), q(v, 0.5), q(v, 0.99))
		return true
	case "marker":
		p := data["phase"]
		s.mu.Lock()
		changed := p != s.lastPhase
		s.lastPhase = p
		s.mu.Unlock()
		if changed && p != "" {
			Line("peer marker phase=%s", p)
		}
		return true
	}
	return false
}

// Sample records the latency of a write stamped with data.t (wall seconds),
// taken at the reconcile's start (`now`).
func (s *Stats) Sample(now float64, data map[string]string) {
	t, err := strconv.ParseFloat(data["t"], 64)
	if err != nil || t <= 0 {
		return
	}
	s.mu.Lock()
	s.samples = append(s.samples, now-t)
	s.mu.Unlock()
}

// q is the f-quantile of sorted v in milliseconds (the nearest rank, as
// the Lua controller and bench/event_latency.c compute it).
func q(v []float64, f float64) float64 {
	if len(v) == 0 {
		return 0
	}
	i := int(math.Ceil(f*float64(len(v)))) - 1
	if i < 0 {
		i = 0
	}
	return v[i] * 1e3
}
