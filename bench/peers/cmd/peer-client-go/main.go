// peer-client-go: the controller `make bench-peers` compares luna with, as
// client-go's own sample controller builds one: a shared informer (typed
// for ConfigMaps, dynamic for the Items of the status mode), a lister, a
// rate-limited workqueue and PEERS_WORKERS worker goroutines started once
// the cache has synced.  What a reconcile does and the lines it prints are
// internal/peer's contract.
package main

import (
	"context"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"luna.bench/peers/internal/peer"
)

var items = schema.GroupVersionResource{Group: "bench.luna.dev", Version: "v1", Resource: "items"}

func main() {
	o, cfg := peer.Load()
	if o.Mode == "webhooks" {
		peer.Die("client-go has no webhook server: the webhooks mode is peer-controller-runtime's")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	stats := peer.NewStats(o.Objects)
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()

	var informer cache.SharedIndexInformer
	var reconcile func(key string) error
	if o.Mode == "configmaps" {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			peer.Die("%v", err)
		}
		f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(o.Namespace))
		cms := f.Core().V1().ConfigMaps()
		informer = cms.Informer()
		lister := cms.Lister()
		reconcile = func(key string) error {
			now := peer.Wall()
			ns, name, _ := cache.SplitMetaNamespaceKey(key)
			cm, err := lister.ConfigMaps(ns).Get(name)
			if err != nil {
				return nil // deleted: nothing to do
			}
			if stats.Special(name, cm.Data) {
				return nil
			}
			stats.Sample(now, cm.Data)
			if strings.HasPrefix(name, "cm-") {
				stats.Reconciled()
			}
			return nil
		}
		_, _ = informer.AddEventHandler(handler(queue, func(old, cur any) bool { return true }))
		f.Start(ctx.Done())
	} else {
		dc, err := dynamic.NewForConfig(cfg)
		if err != nil {
			peer.Die("%v", err)
		}
		f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dc, 0, o.Namespace, nil)
		gi := f.ForResource(items)
		informer = gi.Informer()
		lister := gi.Lister()
		client := dc.Resource(items).Namespace(o.Namespace)
		reconcile = func(key string) error {
			_, name, _ := cache.SplitMetaNamespaceKey(key)
			obj, err := lister.ByNamespace(o.Namespace).Get(name)
			if err != nil {
				return nil
			}
			u := obj.(*unstructured.Unstructured).DeepCopy()
			if run, _, _ := unstructured.NestedString(u.Object, "status", "run"); run == o.Run {
				return nil
			}
			if err := unstructured.SetNestedField(u.Object, o.Run, "status", "run"); err != nil {
				return err
			}
			if _, err := client.UpdateStatus(context.Background(), u, metav1.UpdateOptions{}); err != nil {
				return err
			}
			stats.Wrote()
			return nil
		}
		// Generation changed: a status write does not reconcile again.
		_, _ = informer.AddEventHandler(handler(queue, func(old, cur any) bool {
			return old.(metav1.Object).GetGeneration() != cur.(metav1.Object).GetGeneration()
		}))
		f.Start(ctx.Done())
	}

	for !informer.HasSynced() {
		if ctx.Err() != nil {
			return
		}
		time.Sleep(time.Millisecond)
	}
	peer.Synced()
	for i := 0; i < o.Workers; i++ {
		go func() {
			for {
				key, quit := queue.Get()
				if quit {
					return
				}
				stats.Begin()
				if err := reconcile(key); err != nil {
					queue.AddRateLimited(key)
				} else {
					queue.Forget(key)
				}
				queue.Done(key)
			}
		}()
	}
	<-ctx.Done()
}

// handler enqueues the key of every add and delete, and of updates `pass`
// lets through.
func handler(q workqueue.TypedRateLimitingInterface[string], pass func(old, cur any) bool) cache.ResourceEventHandler {
	add := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			q.Add(key)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: add,
		UpdateFunc: func(old, cur any) {
			if pass(old, cur) {
				add(cur)
			}
		},
		DeleteFunc: add,
	}
}
