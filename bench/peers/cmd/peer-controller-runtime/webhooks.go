// The webhooks mode (PEERS_MODE=webhooks): the configmaps controller of
// main.go, plus a validating and a defaulting webhook for the bench's Item
// kind, written as kubebuilder scaffolds them: a typed Go Item, a
// Validator and a Defaulter (controller-runtime's generic forms of
// CustomValidator and CustomDefaulter) registered on the manager's
// webhook.Server, HTTP/2 off as kubebuilder's scaffold turns it off.
// The rules are bench/peers.lua's M.webhooks, line for line; peers-load's
// `webhook` command checks both subjects' answers against the same
// expectations.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"luna.bench/peers/internal/peer"
)

// The paths luna serves its webhooks on (/validate/NAME, /mutate/NAME), so
// the load generator sends the same requests to both.
const (
	validatePath = "/validate/items.validate.bench.luna.dev"
	mutatePath   = "/mutate/items.default.bench.luna.dev"
	maxSize      = 1000000
	sizeClass    = "bench.luna.dev/size-class"
)

// ItemSpec and Item: the Go type a kubebuilder project would have for
// bench.luna.dev/v1 Item.
type ItemSpec struct {
	Size *int64 `json:"size,omitempty"`
	Mode string `json:"mode,omitempty"`
}

type ItemStatus struct {
	Run string `json:"run,omitempty"`
}

type Item struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ItemSpec   `json:"spec,omitempty"`
	Status            ItemStatus `json:"status,omitempty"`
}

// DeepCopyObject is what controller-gen would generate.
func (in *Item) DeepCopyObject() runtime.Object {
	out := *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if in.Spec.Size != nil {
		s := *in.Spec.Size
		out.Spec.Size = &s
	}
	return &out
}

type itemWebhook struct{}

func checkItem(it *Item) error {
	if it.Spec.Size == nil || *it.Spec.Size < 0 || *it.Spec.Size > maxSize {
		return errors.New("spec.size must be an integer from 0 to 1000000")
	}
	if m := it.Spec.Mode; m != "" && m != "fast" && m != "safe" {
		return errors.New("spec.mode must be fast or safe")
	}
	return nil
}

func (itemWebhook) ValidateCreate(_ context.Context, it *Item) (admission.Warnings, error) {
	return nil, checkItem(it)
}

func (itemWebhook) ValidateUpdate(_ context.Context, old, it *Item) (admission.Warnings, error) {
	if err := checkItem(it); err != nil {
		return nil, err
	}
	if old.Spec.Mode != "" && it.Spec.Mode != old.Spec.Mode {
		return nil, errors.New("spec.mode is immutable")
	}
	return nil, nil
}

func (itemWebhook) ValidateDelete(context.Context, *Item) (admission.Warnings, error) {
	return nil, nil
}

func (itemWebhook) Default(_ context.Context, it *Item) error {
	if it.Spec.Mode == "" {
		it.Spec.Mode = "safe"
	}
	if _, ok := it.Labels[sizeClass]; !ok {
		if it.Labels == nil {
			it.Labels = map[string]string{}
		}
		class := "small"
		if it.Spec.Size != nil && *it.Spec.Size >= 1000 {
			class = "large"
		}
		it.Labels[sizeClass] = class
	}
	return nil
}

// webhookServer is the server the manager runs, on a free loopback port.
func webhookServer(certDir string) (webhook.Server, int) {
	// controller-runtime takes a port, not a listener: take a free one and
	// hand it over (nothing else on this machine binds loopback ports in
	// the moment between).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		peer.Die("webhook port: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	scheme := runtime.NewScheme()
	gv := schema.GroupVersion{Group: "bench.luna.dev", Version: "v1"}
	scheme.AddKnownTypes(gv, &Item{})
	metav1.AddToGroupVersion(scheme, gv)
	srv := webhook.NewServer(webhook.Options{
		Host: "127.0.0.1", Port: port, CertDir: certDir,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
	})
	srv.Register(validatePath, admission.WithValidator[*Item](scheme, itemWebhook{}))
	srv.Register(mutatePath, admission.WithDefaulter[*Item](scheme, itemWebhook{}))
	return srv, port
}

// announceServing prints the serving line once the server answers TLS.
func announceServing(ctx context.Context, srv webhook.Server, port int) {
	check := srv.StartedChecker()
	req, _ := http.NewRequest("GET", "/", nil)
	for ctx.Err() == nil {
		if check(req) == nil {
			peer.Line("peer webhooks serving port=%d", port)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
