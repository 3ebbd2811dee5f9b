// peer-controller-runtime: the controller-runtime controller `make
// bench-peers` compares luna with, written as its book does: a manager
// whose cache covers PEERS_NAMESPACE, a controller For ConfigMaps (typed) or
// Items (unstructured, cached, with GenerationChangedPredicate) with
// MaxConcurrentReconciles = PEERS_WORKERS, and a reconciler that reads
// through the manager's cached client.  PEERS_MODE=webhooks adds admission
// webhooks for Items to the configmaps controller (webhooks.go).  Metrics and probes are off, as they
// are for luna and the client-go peer.  What a reconcile does and the lines
// it prints are internal/peer's contract.
package main

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"luna.bench/peers/internal/peer"
)

var itemKind = schema.GroupVersionKind{Group: "bench.luna.dev", Version: "v1", Kind: "Item"}

type configMaps struct {
	client.Client
	stats *peer.Stats
}

func (r *configMaps) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.stats.Begin()
	now := peer.Wall()
	var cm corev1.ConfigMap
	if err := r.Get(ctx, req.NamespacedName, &cm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.stats.Special(req.Name, cm.Data) {
		return ctrl.Result{}, nil
	}
	r.stats.Sample(now, cm.Data)
	if strings.HasPrefix(req.Name, "cm-") {
		r.stats.Reconciled()
	}
	return ctrl.Result{}, nil
}

type items struct {
	client.Client
	stats *peer.Stats
	run   string
}

func (r *items) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.stats.Begin()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(itemKind)
	if err := r.Get(ctx, req.NamespacedName, u); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if run, _, _ := unstructured.NestedString(u.Object, "status", "run"); run == r.run {
		return ctrl.Result{}, nil
	}
	if err := unstructured.SetNestedField(u.Object, r.run, "status", "run"); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.Status().Update(ctx, u); err != nil {
		return ctrl.Result{}, err
	}
	r.stats.Wrote()
	return ctrl.Result{}, nil
}

func main() {
	o, cfg := peer.Load()
	ctrl.SetLogger(logr.Discard())
	ctx := ctrl.SetupSignalHandler()
	mopts := ctrl.Options{
		Metrics:                server.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{o.Namespace: {}}},
		Client:                 client.Options{Cache: &client.CacheOptions{Unstructured: true}},
	}
	var port int
	if o.Mode == "webhooks" {
		mopts.WebhookServer, port = webhookServer(os.Getenv("PEERS_WEBHOOK_CERT_DIR"))
	}
	mgr, err := ctrl.NewManager(cfg, mopts)
	if err != nil {
		peer.Die("manager: %v", err)
	}
	stats := peer.NewStats(o.Objects)
	opts := controller.Options{MaxConcurrentReconciles: o.Workers}
	var watched client.Object
	if o.Mode == "configmaps" || o.Mode == "webhooks" {
		watched = &corev1.ConfigMap{}
		err = ctrl.NewControllerManagedBy(mgr).For(watched).WithOptions(opts).
			Complete(&configMaps{mgr.GetClient(), stats})
	} else {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(itemKind)
		watched = u
		err = ctrl.NewControllerManagedBy(mgr).For(u).WithOptions(opts).
			WithEventFilter(predicate.GenerationChangedPredicate{}).
			Complete(&items{mgr.GetClient(), stats, o.Run})
	}
	if err != nil {
		peer.Die("controller: %v", err)
	}
	// The controller's informer, to say when it has synced (the manager
	// starts the workers at the same moment).
	inf, err := mgr.GetCache().GetInformer(ctx, watched)
	if err != nil {
		peer.Die("informer: %v", err)
	}
	go func() {
		for !inf.HasSynced() {
			if ctx.Err() != nil {
				return
			}
			time.Sleep(time.Millisecond)
		}
		peer.Synced()
	}()
	if o.Mode == "webhooks" {
		go announceServing(ctx, mgr.GetWebhookServer(), port)
	}
	if err := mgr.Start(ctx); err != nil {
		peer.Die("manager: %v", err)
	}
}
