// Command resources writes host/devserver/devserver_resources.c: the table
// of every built-in resource the dev server serves (devserver_resources.h).
//
// Route: the facts (group, version, resource, singular, kind, scope, verbs,
// short names, categories, subresources) are exactly what the pinned
// kube-apiserver publishes in aggregated discovery, so this program asks a
// running one (started by spec/kube/cluster.sh from `make kube`'s binaries,
// with default feature gates and runtime config: GA and beta-on-by-default
// APIs, no alpha, no aggregated servers) for /api and /apis with
// `Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`,
// in the server's order (group priority, preferred version first).  Which
// versions share one stored collection (autoscaling v1 and v2
// HorizontalPodAutoscalers, core and events.k8s.io Events) is not in the
// aggregated document: the legacy per-version lists carry storageVersionHash,
// equal for every version stored as the same group/version/kind, so those
// are read too.  Importing the k8s.io/kubernetes registry packages instead
// would mean building most of kube-apiserver into the generator and
// repeating its feature-gate and default-on logic; asking the binary is
// shorter and right by construction.
//
// Server-side apply and strategic merge patches need each kind's list-map
// keys: they come from the same server's OpenAPI v3 documents
// (/openapi/v3/api/v1, /openapi/v3/apis/G/V): every array under the kind's
// schema with x-kubernetes-list-type "map" gives its path (field names
// joined by ".") and its first x-kubernetes-list-map-keys entry.
//
//	spec/kube/cluster.sh run -- sh -c 'cd spec/kube/kubernetes && go run ./resources' > host/devserver/devserver_resources.c
//
// (`make resources` does exactly that.)  Needs LUNA_KUBE_DIR (cluster.sh
// sets it: the kubeconfig, ca.crt and token of the running control plane).
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

type gvk struct{ Group, Version, Kind string }

type subresource struct {
	Subresource  string
	ResponseKind *gvk
	Verbs        []string
}

type resource struct {
	Resource         string
	ResponseKind     *gvk
	Scope            string
	SingularResource string
	Verbs            []string
	ShortNames       []string
	Categories       []string
	Subresources     []subresource
}

type version struct {
	Version   string
	Resources []resource
}

type group struct {
	Metadata struct{ Name string }
	Versions []version
}

type discoveryList struct{ Items []group }

type legacyList struct {
	Resources []struct {
		Name               string
		StorageVersionHash string
	}
}

var client *http.Client
var server, token string

func get(path, accept string, into any) {
	req, err := http.NewRequest("GET", server+path, nil)
	check(err)
	req.Header.Set("Accept", accept)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	check(err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	check(err)
	if resp.StatusCode != 200 {
		fail("GET %s: %d %s", path, resp.StatusCode, body)
	}
	check(json.Unmarshal(body, into))
}

func check(err error) {
	if err != nil {
		fail("%v", err)
	}
}

func fail(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "resources: "+f+"\n", a...)
	os.Exit(1)
}

// The subresources the dev server implements get a flag; the others are
// kept as a list (documentation: they are not advertised).
var subFlag = map[string]string{
	"status": "LUNA_DS_SUB_STATUS",
	"scale":  "LUNA_DS_SUB_SCALE",
	"token":  "LUNA_DS_SUB_TOKEN", // serviceaccounts/token (devserver_auth)
}

var verbFlag = map[string]string{
	"create": "LUNA_DS_VERB_CREATE", "delete": "LUNA_DS_VERB_DELETE",
	"deletecollection": "LUNA_DS_VERB_DELETECOLLECTION", "get": "LUNA_DS_VERB_GET",
	"list": "LUNA_DS_VERB_LIST", "patch": "LUNA_DS_VERB_PATCH",
	"update": "LUNA_DS_VERB_UPDATE", "watch": "LUNA_DS_VERB_WATCH",
}

func flags(names []string, table map[string]string, what string) string {
	var out []string
	for _, n := range names {
		f, ok := table[n]
		if !ok {
			fail("unknown %s %q", what, n)
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return "0"
	}
	if what == "verb" && len(out) == len(verbFlag) {
		return "LUNA_DS_VERBS_ALL"
	}
	return strings.Join(out, " | ")
}

func cstr(s string) string { return fmt.Sprintf("%q", s) }

type schema struct {
	Ref          string             `json:"$ref"`
	AllOf        []*schema          `json:"allOf"`
	Type         string             `json:"type"`
	Properties   map[string]*schema `json:"properties"`
	Items        *schema            `json:"items"`
	ListType     string             `json:"x-kubernetes-list-type"`
	ListMapKeys  []string           `json:"x-kubernetes-list-map-keys"`
	GVK          []gvk              `json:"x-kubernetes-group-version-kind"`
	Additional   json.RawMessage    `json:"additionalProperties"`
}

type openapiDoc struct {
	Components struct{ Schemas map[string]*schema }
}

type listKey struct{ path, key string }

// listKeys walks s (a kind's schema) and returns its map-typed lists.
func listKeys(doc *openapiDoc, s *schema, path []string, stack map[string]bool, out *[]listKey) {
	for s != nil && (s.Ref != "" || (len(s.AllOf) == 1 && s.Properties == nil)) {
		if s.Ref == "" {
			s = s.AllOf[0]
			continue
		}
		name := strings.TrimPrefix(s.Ref, "#/components/schemas/")
		if stack[name] { // a recursive type (JSONSchemaProps): its lists are atomic
			return
		}
		stack[name] = true
		defer delete(stack, name)
		s = doc.Components.Schemas[name]
	}
	if s == nil {
		return
	}
	if s.Items != nil {
		if s.ListType == "map" && len(s.ListMapKeys) > 0 {
			*out = append(*out, listKey{strings.Join(path, "."), s.ListMapKeys[0]})
		}
		listKeys(doc, s.Items, path, stack, out)
		return
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if len(path) == 0 && (n == "metadata" || n == "apiVersion" || n == "kind") {
			continue
		}
		listKeys(doc, s.Properties[n], append(append([]string{}, path...), n), stack, out)
	}
}

func main() {
	dir := os.Getenv("LUNA_KUBE_DIR")
	if dir == "" {
		fail("LUNA_KUBE_DIR is not set: run under spec/kube/cluster.sh run")
	}
	kc, err := os.ReadFile(filepath.Join(dir, "kubeconfig"))
	check(err)
	m := regexp.MustCompile(`server:\s*(\S+)`).FindSubmatch(kc)
	if m == nil {
		fail("no server in %s/kubeconfig", dir)
	}
	server = string(m[1])
	tok, err := os.ReadFile(filepath.Join(dir, "token"))
	check(err)
	token = strings.TrimSpace(string(tok))
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	check(err)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}

	const aggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	var core, apis discoveryList
	get("/api", aggregated, &core)
	get("/apis", aggregated, &apis)
	groups := append(core.Items, apis.Items...)

	var version string
	var v struct{ GitVersion string }
	get("/version", "application/json", &v)
	version = v.GitVersion

	type row struct {
		g, v string
		r    resource
		hash string
		keys []listKey
	}
	var rows []row
	for _, g := range groups {
		for _, ver := range g.Versions {
			path := "/apis/" + g.Metadata.Name + "/" + ver.Version
			if g.Metadata.Name == "" {
				path = "/api/" + ver.Version
			}
			var legacy legacyList
			get(path, "application/json", &legacy)
			var doc openapiDoc
			get("/openapi/v3"+path, "application/json", &doc)
			kinds := map[string]*schema{}
			for _, sc := range doc.Components.Schemas {
				for _, k := range sc.GVK {
					if k.Group == g.Metadata.Name && k.Version == ver.Version {
						kinds[k.Kind] = sc
					}
				}
			}
			hashes := map[string]string{}
			for _, lr := range legacy.Resources {
				hashes[lr.Name] = lr.StorageVersionHash
			}
			for _, r := range ver.Resources {
				var keys []listKey
				if r.ResponseKind != nil && kinds[r.ResponseKind.Kind] != nil {
					listKeys(&doc, kinds[r.ResponseKind.Kind], nil, map[string]bool{}, &keys)
				}
				rows = append(rows, row{g.Metadata.Name, ver.Version, r, hashes[r.Resource], keys})
			}
		}
	}
	// Versions stored alike share the collection of the first of them in
	// discovery order (the core group first, then a group's preferred
	// version first): that is the storage version here.
	storage := map[string]int{}
	for i, r := range rows {
		if r.hash == "" {
			continue
		}
		if _, ok := storage[r.hash]; !ok {
			storage[r.hash] = i
		}
	}

	w := os.Stdout
	fmt.Fprintf(w, `/* devserver_resources.c — GENERATED by `+"`make resources`"+` (spec/kube/kubernetes/resources)
 * from the aggregated discovery of kube-apiserver %s with its default
 * feature gates and runtime config.  Do not edit: regenerate.
 * See devserver_resources.h for the fields.  Subresources the dev server
 * does not implement are listed in `+"`others`"+` and not advertised. */
#include "devserver/devserver_resources.h"

const luna_ds_list_key_def luna_ds_list_keys[] = {
`, version)
	first := make([]int, len(rows))
	n := 0
	for i, r := range rows {
		first[i] = n
		for _, k := range r.keys {
			fmt.Fprintf(w, "    { %s, %s },\n", cstr(k.path), cstr(k.key))
			n++
		}
	}
	fmt.Fprintf(w, "};\n\nconst luna_ds_resource_def luna_ds_resources[] = {\n")
	for i, r := range rows {
		res := r.r
		if res.ResponseKind == nil {
			fail("%s/%s %s: no responseKind", r.g, r.v, res.Resource)
		}
		var subs, others []string
		for _, s := range res.Subresources {
			if _, ok := subFlag[s.Subresource]; ok {
				subs = append(subs, s.Subresource)
			} else {
				others = append(others, s.Subresource)
			}
		}
		sort.Strings(others)
		st := i
		if r.hash != "" {
			st = storage[r.hash]
		}
		fmt.Fprintf(w, "    { %s, %s, %s, %s, %s, %v,\n      %s, %s, %s,\n      %s, %s, %d, %d, %d },\n",
			cstr(r.g), cstr(r.v), cstr(res.Resource), cstr(res.SingularResource),
			cstr(res.ResponseKind.Kind), res.Scope == "Namespaced",
			cstr(strings.Join(res.ShortNames, ",")), cstr(strings.Join(res.Categories, ",")),
			flags(res.Verbs, verbFlag, "verb"),
			flags(subs, subFlag, "subresource"), cstr(strings.Join(others, ",")), st,
			first[i], len(r.keys))
	}
	fmt.Fprintf(w, "};\n\nconst size_t luna_ds_resources_len = sizeof luna_ds_resources / sizeof *luna_ds_resources;\n")
}
