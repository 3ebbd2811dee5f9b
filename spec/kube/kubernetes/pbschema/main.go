// Command pbschema writes host/devserver/devserver_pbschema.c: the protobuf
// schema tables the dev server decodes kubectl's protobuf request bodies
// with (host/devserver/devserver_protobuf.h).
//
// It reads the facts from the Go types of the pinned k8s.io/api release by
// reflection: for every field of every message reachable from the kinds
// below, its protobuf field number, its JSON name and the JSON encoder's
// rules for it (omitempty, omitzero, inline, pointer), in Go field order,
// which is the order the JSON encoder writes.  Nothing of those packages is
// copied; the output is a table of numbers and names.
//
//	cd spec/kube/kubernetes && go run ./pbschema > ../../../host/devserver/devserver_pbschema.c
//
// (`make pbschema` does exactly that.)  The program fails on a Go type it
// has no rule for rather than writing a table that would decode it wrong.
package main

import (
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
)

// The kinds kubectl's `create` generators write (and their cluster-scoped
// RBAC and CronJob siblings): `kubectl create --help` lists them.
var roots = []struct {
	apiVersion, kind string
	t                reflect.Type
}{
	{"v1", "Namespace", reflect.TypeOf(corev1.Namespace{})},
	{"v1", "ConfigMap", reflect.TypeOf(corev1.ConfigMap{})},
	{"v1", "Secret", reflect.TypeOf(corev1.Secret{})},
	{"v1", "ServiceAccount", reflect.TypeOf(corev1.ServiceAccount{})},
	{"v1", "Service", reflect.TypeOf(corev1.Service{})},
	{"apps/v1", "Deployment", reflect.TypeOf(appsv1.Deployment{})},
	{"batch/v1", "Job", reflect.TypeOf(batchv1.Job{})},
	{"batch/v1", "CronJob", reflect.TypeOf(batchv1.CronJob{})},
	{"rbac.authorization.k8s.io/v1", "Role", reflect.TypeOf(rbacv1.Role{})},
	{"rbac.authorization.k8s.io/v1", "RoleBinding", reflect.TypeOf(rbacv1.RoleBinding{})},
	{"rbac.authorization.k8s.io/v1", "ClusterRole", reflect.TypeOf(rbacv1.ClusterRole{})},
	{"rbac.authorization.k8s.io/v1", "ClusterRoleBinding", reflect.TypeOf(rbacv1.ClusterRoleBinding{})},
	{"v1", "ResourceQuota", reflect.TypeOf(corev1.ResourceQuota{})},
	{"networking.k8s.io/v1", "Ingress", reflect.TypeOf(networkingv1.Ingress{})},
	{"policy/v1", "PodDisruptionBudget", reflect.TypeOf(policyv1.PodDisruptionBudget{})},
	{"scheduling.k8s.io/v1", "PriorityClass", reflect.TypeOf(schedulingv1.PriorityClass{})},
}

// Types with their own wire and JSON form (their MarshalJSON / Unmarshal).
var special = map[string]string{
	"k8s.io/apimachinery/pkg/apis/meta/v1.Time":       "LUNA_PB_TIME",
	"k8s.io/apimachinery/pkg/apis/meta/v1.FieldsV1":   "LUNA_PB_RAWJSON",
	"k8s.io/apimachinery/pkg/runtime.RawExtension":    "LUNA_PB_RAWJSON",
	"k8s.io/apimachinery/pkg/util/intstr.IntOrString": "LUNA_PB_INTORSTRING",
	"k8s.io/apimachinery/pkg/api/resource.Quantity":   "LUNA_PB_QUANTITY",
}

type field struct {
	num   int
	json  string // "" when inline
	kind  string
	flags []string
	msg   string // message name (MESSAGE kind, or a map's values)
}

type message struct {
	name   string
	fields []field
}

var (
	messages = map[string]*message{}
	visiting = map[string]bool{}
	order    []string
)

func typeName(t reflect.Type) string { return t.PkgPath() + "." + t.Name() }

// cname: a C identifier for a Go type ("core_v1_PodSpec").
func cname(full string) string {
	full = strings.TrimPrefix(full, "k8s.io/api/")
	full = strings.TrimPrefix(full, "k8s.io/apimachinery/pkg/apis/")
	return strings.NewReplacer("/", "_", ".", "_", "-", "_").Replace(full)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pbschema: "+format+"\n", args...)
	os.Exit(1)
}

// scalar: the table kind of a Go scalar type.
func scalar(t reflect.Type, where string) string {
	if k, ok := special[typeName(t)]; ok {
		return k
	}
	switch t.Kind() {
	case reflect.String:
		return "LUNA_PB_STRING"
	case reflect.Bool:
		return "LUNA_PB_BOOL"
	case reflect.Int32:
		return "LUNA_PB_INT32"
	case reflect.Int64:
		return "LUNA_PB_INT64"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "LUNA_PB_BYTES"
		}
	case reflect.Struct:
		visit(t)
		return "LUNA_PB_MESSAGE"
	}
	fail("%s: no rule for Go type %s", where, t)
	return ""
}

func visit(t reflect.Type) string {
	name := typeName(t)
	if _, ok := special[name]; ok {
		return name
	}
	if _, ok := messages[name]; ok {
		if visiting[name] {
			// The decoder recurses once per nesting level: a schema
			// without cycles bounds its depth, whatever the input.
			fail("%s: the type contains itself", name)
		}
		return name
	}
	m := &message{name: name}
	messages[name] = m
	visiting[name] = true
	defer delete(visiting, name)
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		where := name + "." + sf.Name
		pb := sf.Tag.Get("protobuf")
		js := sf.Tag.Get("json")
		if pb == "" {
			// TypeMeta travels in the runtime.Unknown envelope, not the object.
			if sf.Anonymous && typeName(sf.Type) == "k8s.io/apimachinery/pkg/apis/meta/v1.TypeMeta" {
				continue
			}
			fail("%s: no protobuf tag", where)
		}
		parts := strings.Split(pb, ",")
		num, err := strconv.Atoi(parts[1])
		if err != nil {
			fail("%s: protobuf tag %q", where, pb)
		}
		f := field{num: num}
		jparts := strings.Split(js, ",")
		switch {
		case jparts[0] == "-":
			f.flags = append(f.flags, "LUNA_PB_F_NOJSON")
		case jparts[0] == "" && len(jparts) > 1 && jparts[1] == "inline",
			js == "" && sf.Anonymous: // Go's JSON encoder inlines an untagged embedded struct
			f.flags = append(f.flags, "LUNA_PB_F_INLINE")
		case jparts[0] == "":
			fail("%s: json tag %q", where, js)
		default:
			f.json = jparts[0]
		}
		for _, o := range jparts[1:] {
			switch o {
			case "omitempty":
				f.flags = append(f.flags, "LUNA_PB_F_OMITEMPTY")
			case "omitzero":
				f.flags = append(f.flags, "LUNA_PB_F_OMITZERO")
			case "inline":
			default:
				fail("%s: json option %q", where, o)
			}
		}
		ft := sf.Type
		if ft.Kind() == reflect.Pointer {
			f.flags = append(f.flags, "LUNA_PB_F_POINTER")
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Map:
			if ft.Key().Kind() != reflect.String {
				fail("%s: map key %s", where, ft.Key())
			}
			f.flags = append(f.flags, "LUNA_PB_F_MAP")
			vt := ft.Elem()
			if vt.Kind() == reflect.Slice && vt.Elem().Kind() != reflect.Uint8 {
				fail("%s: map of lists %s", where, vt)
			}
			f.kind = scalar(vt, where)
			if f.kind == "LUNA_PB_MESSAGE" {
				f.msg = typeName(vt)
			}
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Uint8:
			f.flags = append(f.flags, "LUNA_PB_F_REPEATED")
			et := ft.Elem()
			if et.Kind() == reflect.Pointer {
				fail("%s: list of pointers", where)
			}
			f.kind = scalar(et, where)
			if f.kind == "LUNA_PB_MESSAGE" {
				f.msg = typeName(et)
			}
		default:
			f.kind = scalar(ft, where)
			if f.kind == "LUNA_PB_MESSAGE" {
				f.msg = typeName(ft)
			}
		}
		if (f.kind == "LUNA_PB_MESSAGE") != (f.msg != "") {
			fail("%s: message without a type", where)
		}
		m.fields = append(m.fields, f)
	}
	order = append(order, name)
	return name
}

func main() {
	for _, r := range roots {
		visit(r.t)
	}
	sort.Strings(order)
	index := map[string]int{}
	for i, n := range order {
		index[n] = i
	}
	w := os.Stdout
	fmt.Fprintln(w, "/* devserver_pbschema.c — GENERATED by spec/kube/kubernetes/pbschema (`make pbschema`)")
	fmt.Fprintln(w, " * from the Go types of the k8s.io/api release spec/kube/kubernetes/go.mod pins;")
	fmt.Fprintln(w, " * do not edit.  Per message, its fields in Go order (the JSON encoder's")
	fmt.Fprintln(w, " * order): protobuf number, JSON name, kind, flags, message.  See")
	fmt.Fprintln(w, " * devserver_protobuf.h. */")
	fmt.Fprintln(w, "#include \"devserver/devserver_protobuf.h\"")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "enum {")
	for _, n := range order {
		fmt.Fprintf(w, "    M_%s,\n", cname(n))
	}
	fmt.Fprintln(w, "};")
	fmt.Fprintln(w)
	for _, n := range order {
		m := messages[n]
		fmt.Fprintf(w, "static const luna_ds_pb_field F_%s[] = {\n", cname(n))
		for _, f := range m.fields {
			flags := "0"
			if len(f.flags) > 0 {
				flags = strings.Join(f.flags, " | ")
			}
			js := "NULL"
			if f.json != "" {
				js = strconv.Quote(f.json)
			}
			msg := "-1"
			if f.msg != "" {
				if _, ok := index[f.msg]; ok {
					msg = "M_" + cname(f.msg)
				}
			}
			fmt.Fprintf(w, "    { %d, %s, %s, %s, %s },\n", f.num, js, f.kind, flags, msg)
		}
		fmt.Fprintln(w, "};")
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "const luna_ds_pb_message luna_ds_pb_messages[] = {")
	for _, n := range order {
		fmt.Fprintf(w, "    [M_%s] = { %q, F_%s, %d },\n", cname(n), n, cname(n), len(messages[n].fields))
	}
	fmt.Fprintln(w, "};")
	fmt.Fprintln(w, "const size_t luna_ds_pb_n_messages = sizeof luna_ds_pb_messages / sizeof *luna_ds_pb_messages;")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "const luna_ds_pb_kind luna_ds_pb_kinds[] = {")
	for _, r := range roots {
		fmt.Fprintf(w, "    { %q, %q, M_%s },\n", r.apiVersion, r.kind, cname(typeName(r.t)))
	}
	fmt.Fprintln(w, "};")
	fmt.Fprintln(w, "const size_t luna_ds_pb_n_kinds = sizeof luna_ds_pb_kinds / sizeof *luna_ds_pb_kinds;")
}
