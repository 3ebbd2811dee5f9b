// Command apischema writes host/devserver/devserver_apischema.c: the
// schema tables the dev server validates write bodies with
// (host/devserver/devserver_schema.h), for every built-in kind of the
// pinned release.
//
// The facts come from two generated sources of that release, read here,
// never copied:
//   - the Go types of k8s.io/api (and apiextensions), by reflection, for
//     every kind the client-go scheme registers: each field's JSON name
//     and Go type, so a body that does not decode into them is refused
//     with the message Go's JSON decoder gives;
//   - the OpenAPI definitions generated into k8s.io/kubernetes
//     (pkg/generated/openapi) and apiextensions-apiserver: each type's
//     required fields, each field's enum values and its +default.
//
// Immutable fields are enforced by kube's Go validation code, not by the
// schema: the one hand-kept table is `immutables` below, each row naming
// where kube enforces it.
//
//	cd spec/kube/kubernetes && go run ./apischema > ../../../host/devserver/devserver_apischema.c
//
// (`make apischema` does exactly that.)  The program fails on a Go type it
// has no rule for rather than writing a table that would check it wrong.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	extopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
	regv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	regopenapi "k8s.io/kube-aggregator/pkg/generated/openapi"
	kubeopenapi "k8s.io/kubernetes/pkg/generated/openapi"
)

// Types whose JSON form their own UnmarshalJSON decides; the C side knows
// what each refuses (devserver_schema.c).
var special = map[string]string{
	"k8s.io/apimachinery/pkg/apis/meta/v1.Time":       "LUNA_SCH_TIME",
	"k8s.io/apimachinery/pkg/apis/meta/v1.MicroTime":  "LUNA_SCH_TIME",
	"k8s.io/apimachinery/pkg/util/intstr.IntOrString": "LUNA_SCH_INTORSTRING",
	"k8s.io/apimachinery/pkg/api/resource.Quantity":   "LUNA_SCH_QUANTITY",
}

// Immutable fields, where kube's validation enforces them (on update, for
// the kind's every served version).  how: "field" is
// ValidateImmutableField (422 FieldValueInvalid "field is immutable"),
// "locked" is the ConfigMap/Secret rule (once `immutable` is true, the
// field may not change: 422 FieldValueForbidden "field is immutable when
// `immutable` is set").  How the message shows the new value: by default
// as field.Invalid prints the internal type's value (a string quoted, a
// struct of k8s.io/api's metav1 types or a map as JSON); "null" where
// declarative validation at beta covers the field (validate.Immutable
// gives no value: zz_generated.validations.go of the kind's version);
// "go" where the value is an internal struct without JSON tags, printed
// as JSON with its Go field names.  A row's absent value, when kube's Go
// defaulting fills the field before validation, is in absentAs.
var immutables = []struct{ group, kind, path, how, where string }{
	{"apps", "Deployment", "spec.selector", "field", "pkg/apis/apps/validation ValidateDeploymentUpdate"},
	{"apps", "ReplicaSet", "spec.selector", "field", "pkg/apis/apps/validation ValidateReplicaSetUpdate"},
	{"apps", "DaemonSet", "spec.selector", "field", "pkg/apis/apps/validation ValidateDaemonSetUpdate"},
	{"apps", "StatefulSet", "spec.selector", "field", "pkg/apis/apps/validation ValidateStatefulSetUpdate"},
	{"apps", "StatefulSet", "spec.serviceName", "field", "pkg/apis/apps/validation ValidateStatefulSetUpdate"},
	{"apps", "StatefulSet", "spec.podManagementPolicy", "field", "pkg/apis/apps/validation ValidateStatefulSetUpdate"},
	{"apps", "ControllerRevision", "data", "field", "pkg/apis/apps/validation ValidateControllerRevisionUpdate"},
	{"batch", "Job", "spec.selector", "field", "pkg/apis/batch/validation ValidateJobSpecUpdate"},
	{"batch", "Job", "spec.completionMode", "field", "pkg/apis/batch/validation ValidateJobSpecUpdate"},
	{"batch", "Job", "spec.podFailurePolicy", "field", "pkg/apis/batch/validation ValidateJobSpecUpdate"},
	{"batch", "Job", "spec.managedBy", "field", "pkg/apis/batch/validation ValidateJobSpecUpdate"},
	{"batch", "Job", "spec.successPolicy", "field", "pkg/apis/batch/validation ValidateJobSpecUpdate"},
	{"", "ConfigMap", "immutable", "locked", "pkg/apis/core/validation ValidateConfigMapUpdate"},
	{"", "ConfigMap", "data", "locked", "pkg/apis/core/validation ValidateConfigMapUpdate"},
	{"", "ConfigMap", "binaryData", "locked", "pkg/apis/core/validation ValidateConfigMapUpdate"},
	{"", "Secret", "type", "field", "pkg/apis/core/validation ValidateSecretUpdate (SetDefaults_Secret: Opaque)"},
	{"", "Secret", "immutable", "locked", "pkg/apis/core/validation ValidateSecretUpdate"},
	{"", "Secret", "data", "locked", "pkg/apis/core/validation ValidateSecretUpdate"},
	{"rbac.authorization.k8s.io", "RoleBinding", "roleRef", "field go", "pkg/apis/rbac/validation ValidateRoleBindingUpdate"},
	{"rbac.authorization.k8s.io", "ClusterRoleBinding", "roleRef", "field go", "pkg/apis/rbac/validation ValidateClusterRoleBindingUpdate"},
	{"storage.k8s.io", "StorageClass", "parameters", "field null", "pkg/apis/storage/validation ValidateStorageClassUpdate"},
	{"storage.k8s.io", "StorageClass", "provisioner", "field null", "pkg/apis/storage/validation ValidateStorageClassUpdate"},
	{"storage.k8s.io", "StorageClass", "reclaimPolicy", "field null", "pkg/apis/storage/validation ValidateStorageClassUpdate"},
	{"storage.k8s.io", "StorageClass", "volumeBindingMode", "field null", "pkg/apis/storage/validation ValidateStorageClassUpdate"},
	{"storage.k8s.io", "VolumeAttachment", "spec", "field null", "pkg/apis/storage/validation ValidateVolumeAttachmentUpdate"},
}

// Values kube's Go defaulting (SetDefaults_*, not the OpenAPI +default)
// gives an immutable field left out, keyed "kind.path".
var absentAs = map[string]string{
	"Secret.type":                          "Opaque",       // pkg/apis/core/v1 SetDefaults_Secret
	"StatefulSet.spec.podManagementPolicy": "OrderedReady", // pkg/apis/apps/v1 SetDefaults_StatefulSet
	"Job.spec.completionMode":              "NonIndexed",   // pkg/apis/batch/v1 SetDefaults_Job
	"StorageClass.reclaimPolicy":           "Delete",       // pkg/apis/storage/v1 SetDefaults_StorageClass
	"StorageClass.volumeBindingMode":       "Immediate",    // pkg/apis/storage/v1 SetDefaults_StorageClass
}

type field struct {
	json   string
	kind   string // LUNA_SCH_*
	goType string // the element's Go type as the decoder names it
	list   bool
	isMap  bool
	req    bool
	ptr    bool
	ref    string // struct (LUNA_SCH_STRUCT)
	enum   []string
	def    string // JSON text, "" when none
}

type structT struct {
	name   string // package path and type
	goName string // the type's name alone
	fields []field
}

var (
	structs = map[string]*structT{}
	order   []string
	defs    map[string]common.OpenAPIDefinition
	enums   = map[string]int{}
	enumOrd [][]string
)

func typeName(t reflect.Type) string { return t.PkgPath() + "." + t.Name() }

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "apischema: "+format+"\n", args...)
	os.Exit(1)
}

// goTypeString: reflect's name of t as Go's JSON errors print it
// ("v1.Container", "int32", "[]string").
func goTypeString(t reflect.Type) string { return t.String() }

var unmarshaler = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()

// scalar: the table kind of a Go type (visiting structs).
func scalar(t reflect.Type, where string) (string, string) {
	if k, ok := special[typeName(t)]; ok {
		return k, ""
	}
	if reflect.PointerTo(t).Implements(unmarshaler) {
		return "LUNA_SCH_ANY", ""
	}
	switch t.Kind() {
	case reflect.String:
		return "LUNA_SCH_STRING", ""
	case reflect.Bool:
		return "LUNA_SCH_BOOL", ""
	case reflect.Int32:
		return "LUNA_SCH_INT32", ""
	case reflect.Int64, reflect.Int:
		return "LUNA_SCH_INT64", ""
	case reflect.Float64, reflect.Float32:
		return "LUNA_SCH_FLOAT", ""
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "LUNA_SCH_BYTES", ""
		}
	case reflect.Interface:
		return "LUNA_SCH_ANY", ""
	case reflect.Struct:
		return "LUNA_SCH_STRUCT", visit(t)
	}
	fail("%s: no rule for Go type %s", where, t)
	return "", ""
}

func enumIndex(vals []string) int {
	if len(vals) == 0 {
		return -1
	}
	sort.Strings(vals)
	k := strings.Join(vals, "\x00")
	if i, ok := enums[k]; ok {
		return i
	}
	enums[k] = len(enumOrd)
	enumOrd = append(enumOrd, vals)
	return enums[k]
}

func strs(vs []interface{}) []string {
	var out []string
	for _, v := range vs {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// nonZeroDefault: the +default of a property as JSON, or "" when it has
// none or only the Go zero value (which the decoder gives anyway).
func nonZeroDefault(p spec.Schema) string {
	if p.Default == nil {
		return ""
	}
	b, err := json.Marshal(p.Default)
	if err != nil {
		fail("default %v: %v", p.Default, err)
	}
	switch string(b) {
	case `""`, "0", "false", "{}", "[]", "null":
		return ""
	}
	return string(b)
}

// modelName: the OpenAPI definitions' key of t (its OpenAPIModelName,
// "io.k8s.api.apps.v1.DeploymentSpec", where it has one).
func modelName(t reflect.Type) string {
	type named interface{ OpenAPIModelName() string }
	if n, ok := reflect.New(t).Interface().(named); ok {
		return n.OpenAPIModelName()
	}
	if n, ok := reflect.New(t).Elem().Interface().(named); ok {
		return n.OpenAPIModelName()
	}
	return typeName(t)
}

func visit(t reflect.Type) string {
	name := typeName(t)
	if _, ok := structs[name]; ok {
		return name
	}
	s := &structT{name: name, goName: t.Name()}
	structs[name] = s
	def, hasDef := defs[modelName(t)]
	required := map[string]bool{}
	if hasDef {
		for _, r := range def.Schema.Required {
			required[r] = true
		}
	}
	var fields []field
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		where := name + "." + sf.Name
		if !sf.IsExported() {
			continue
		}
		js := sf.Tag.Get("json")
		jparts := strings.Split(js, ",")
		if jparts[0] == "-" {
			continue
		}
		ft := sf.Type
		ptr := ft.Kind() == reflect.Pointer
		if ptr {
			ft = ft.Elem()
		}
		if (jparts[0] == "" && len(jparts) > 1 && jparts[1] == "inline") || (js == "" && sf.Anonymous) {
			if typeName(ft) == "k8s.io/apimachinery/pkg/apis/meta/v1.TypeMeta" {
				continue // apiVersion and kind: devserver_validate.c
			}
			if ft.Kind() != reflect.Struct {
				fail("%s: inline %s", where, ft)
			}
			// promoted: the embedded struct's fields are this one's
			visit(ft)
			fields = append(fields, structs[typeName(ft)].fields...)
			continue
		}
		if jparts[0] == "" {
			fail("%s: json tag %q", where, js)
		}
		f := field{json: jparts[0], req: required[jparts[0]], ptr: ptr}
		var prop spec.Schema
		if hasDef {
			prop = def.Schema.Properties[f.json]
		}
		f.def = nonZeroDefault(prop)
		switch {
		case ft.Kind() == reflect.Map:
			if ft.Key().Kind() != reflect.String {
				fail("%s: map key %s", where, ft.Key())
			}
			f.isMap = true
			vt := ft.Elem()
			if vt.Kind() == reflect.Slice && vt.Elem().Kind() != reflect.Uint8 {
				// map[string][]string (extra, SubjectAccessReview): the
				// elements are checked as strings, the list not at all
				f.kind, f.ref = "LUNA_SCH_ANY", ""
			} else {
				f.kind, f.ref = scalar(vt, where)
			}
			f.goType = goTypeString(vt)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Uint8:
			f.list = true
			et := ft.Elem()
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Slice && et.Elem().Kind() != reflect.Uint8 {
				f.kind = "LUNA_SCH_ANY" // [][]T: not in any kind's spec we check
			} else {
				f.kind, f.ref = scalar(et, where)
			}
			f.goType = goTypeString(et)
			if prop.Items != nil && prop.Items.Schema != nil {
				f.enum = strs(prop.Items.Schema.Enum)
			}
		default:
			f.kind, f.ref = scalar(ft, where)
			f.goType = goTypeString(ft)
			f.enum = strs(prop.Enum)
		}
		fields = append(fields, f)
	}
	s.fields = fields
	order = append(order, name)
	return name
}

// cname: a C identifier for a Go type ("core_v1_PodSpec").
func cname(full string) string {
	for _, p := range []string{"k8s.io/api/", "k8s.io/apimachinery/pkg/apis/", "k8s.io/apimachinery/pkg/",
		"k8s.io/apiextensions-apiserver/pkg/apis/"} {
		full = strings.TrimPrefix(full, p)
	}
	return strings.NewReplacer("/", "_", ".", "_", "-", "_").Replace(full)
}

// goNames: "json:Go,..." for the struct at path (JSON names joined with
// '.') of group/kind, in Go field order.
func goNames(kinds []kind, group, kindName, path string) string {
	for _, k := range kinds {
		if k.group != group || k.kind != kindName {
			continue
		}
		t := k.t
		for _, p := range strings.Split(path, ".") {
			found := false
			for i := 0; i < t.NumField() && !found; i++ {
				sf := t.Field(i)
				if strings.Split(sf.Tag.Get("json"), ",")[0] == p {
					t, found = sf.Type, true
				}
			}
			if !found {
				fail("immutable %s %s: no field %s", kindName, path, p)
			}
			if t.Kind() == reflect.Pointer {
				t = t.Elem()
			}
		}
		var out []string
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			if t.Field(i).Type.Kind() != reflect.String {
				fail("immutable %s %s: field %s is not a string", kindName, path, sf.Name)
			}
			out = append(out, strings.Split(sf.Tag.Get("json"), ",")[0]+":"+sf.Name)
		}
		return strings.Join(out, ",")
	}
	fail("immutable %s: no such kind", kindName)
	return ""
}

type kind struct {
	apiVersion, kind, group string
	t                       reflect.Type
}

func main() {
	ref := func(path string) spec.Ref { return spec.MustCreateRef("#/definitions/" + path) }
	defs = kubeopenapi.GetOpenAPIDefinitions(ref)
	for k, v := range extopenapi.GetOpenAPIDefinitions(ref) {
		defs[k] = v
	}
	// kube-aggregator's APIService: served by kube-apiserver, outside
	// client-go's scheme
	for k, v := range regopenapi.GetOpenAPIDefinitions(ref) {
		defs[k] = v
	}
	var kinds []kind
	seen := map[string]bool{}
	for gvk, t := range scheme.Scheme.AllKnownTypes() {
		if !strings.HasPrefix(t.PkgPath(), "k8s.io/api/") || strings.HasSuffix(gvk.Kind, "List") {
			continue
		}
		if _, ok := t.FieldByName("ObjectMeta"); !ok {
			continue
		}
		kinds = append(kinds, kind{gvk.GroupVersion().String(), gvk.Kind, gvk.Group, t})
	}
	for _, k := range []string{"CustomResourceDefinition"} {
		kinds = append(kinds, kind{extv1.SchemeGroupVersion.String(), k, extv1.GroupName,
			reflect.TypeOf(extv1.CustomResourceDefinition{})})
	}
	kinds = append(kinds, kind{regv1.SchemeGroupVersion.String(), "APIService", regv1.GroupName,
		reflect.TypeOf(regv1.APIService{})})
	sort.Slice(kinds, func(i, j int) bool {
		if kinds[i].apiVersion != kinds[j].apiVersion {
			return kinds[i].apiVersion < kinds[j].apiVersion
		}
		return kinds[i].kind < kinds[j].kind
	})
	for _, k := range kinds {
		key := k.apiVersion + "/" + k.kind
		if seen[key] {
			fail("%s twice", key)
		}
		seen[key] = true
		visit(k.t)
	}
	sort.Strings(order)
	index := map[string]int{}
	for i, n := range order {
		index[n] = i
	}
	w := os.Stdout
	// Every string once, in one pool the tables index: no pointer in them,
	// so nothing for the loader to relocate at start.  Offset 0 is "".
	var pool []string
	at := map[string]int{"": 0}
	size := 1
	str := func(s string) int {
		if o, ok := at[s]; ok {
			return o
		}
		at[s] = size
		pool = append(pool, s)
		size += len(s) + 1
		return at[s]
	}
	// every enum's values, sorted as kube's NotSupported lists them
	for _, n := range order {
		for _, f := range structs[n].fields {
			enumIndex(f.enum)
		}
	}
	var enumVals []int
	var enumRows []string
	for _, vals := range enumOrd {
		enumRows = append(enumRows, fmt.Sprintf("    { %d, %d },", len(enumVals), len(vals)))
		for _, v := range vals {
			enumVals = append(enumVals, str(v))
		}
	}
	var fieldRows, structRows []string
	for _, n := range order {
		s := structs[n]
		structRows = append(structRows, fmt.Sprintf("    { %d, %d, %d }, /* %s */", str(s.goName),
			len(fieldRows), len(s.fields), cname(n)))
		for _, f := range s.fields {
			var flags []string
			if f.list {
				flags = append(flags, "LUNA_SCH_F_LIST")
			}
			if f.isMap {
				flags = append(flags, "LUNA_SCH_F_MAP")
			}
			if f.req {
				flags = append(flags, "LUNA_SCH_F_REQUIRED")
			}
			if f.ptr {
				flags = append(flags, "LUNA_SCH_F_POINTER")
			}
			fl := "0"
			if len(flags) > 0 {
				fl = strings.Join(flags, " | ")
			}
			ref := -1
			if f.ref != "" {
				ref = index[f.ref]
			}
			en := -1
			if len(f.enum) > 0 {
				en = enumIndex(f.enum)
			}
			fieldRows = append(fieldRows, fmt.Sprintf("    { %d, %d, %d, %s, %s, %d, %d }, /* %s */",
				str(f.json), str(f.goType), str(f.def), f.kind, fl, ref, en, f.json))
		}
	}
	var kindRows []string
	for _, k := range kinds {
		// The status kube serves for a new object: its strategy resets
		// status on create to the Go zero value, which encoding/json
		// writes with every field not omitempty ({"loadBalancer":{}} for
		// an Ingress, the four counters of a PodDisruptionBudget, {} for
		// a Deployment).
		zero := ""
		if f, ok := k.t.FieldByName("Status"); ok && f.Type.Kind() == reflect.Struct {
			b, err := json.Marshal(reflect.Zero(f.Type).Interface())
			if err != nil {
				fmt.Fprintf(os.Stderr, "apischema: zero status of %s: %v\n", k.kind, err)
				os.Exit(1)
			}
			zero = string(b)
		}
		kindRows = append(kindRows, fmt.Sprintf("    { %d, %d, %d, %d }, /* %s %s */", str(k.apiVersion),
			str(k.kind), index[typeName(k.t)], str(zero), k.apiVersion, k.kind))
	}
	nfields := len(fieldRows)

	fmt.Fprintln(w, "/* devserver_apischema.c — GENERATED by spec/kube/kubernetes/apischema (`make apischema`)")
	fmt.Fprintln(w, " * from the Go types and the OpenAPI definitions of the release")
	fmt.Fprintln(w, " * spec/kube/kubernetes/go.mod pins; do not edit.  Strings are offsets")
	fmt.Fprintln(w, " * into luna_ds_sch_strings; per struct, its fields (embedded ones")
	fmt.Fprintln(w, " * promoted): JSON name, Go type, default, kind, flags, struct, enum.  See")
	fmt.Fprintln(w, " * devserver_schema.h. */")
	fmt.Fprintln(w, "#include \"devserver/devserver_schema.h\"")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "const char luna_ds_sch_strings[] =")
	fmt.Fprintln(w, "    \"\\0\"")
	for _, p := range pool {
		q := strconv.Quote(p)
		fmt.Fprintf(w, "    %s\\0\"\n", q[:len(q)-1])
	}
	fmt.Fprintln(w, "    ;")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "const uint32_t luna_ds_sch_enum_values[] = {")
	for i := 0; i < len(enumVals); i += 12 {
		end := min(i+12, len(enumVals))
		var b []string
		for _, v := range enumVals[i:end] {
			b = append(b, strconv.Itoa(v))
		}
		fmt.Fprintf(w, "    %s,\n", strings.Join(b, ", "))
	}
	fmt.Fprintln(w, "};")
	fmt.Fprintln(w, "const luna_ds_sch_enum luna_ds_sch_enums[] = {")
	fmt.Fprintln(w, strings.Join(enumRows, "\n"))
	fmt.Fprintln(w, "};")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "const luna_ds_sch_field luna_ds_sch_fields[] = {")
	fmt.Fprintln(w, strings.Join(fieldRows, "\n"))
	fmt.Fprintln(w, "};")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "const luna_ds_sch_struct luna_ds_sch_structs[] = {")
	fmt.Fprintln(w, strings.Join(structRows, "\n"))
	fmt.Fprintln(w, "};")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "const luna_ds_sch_kind luna_ds_sch_kinds[] = {")
	fmt.Fprintln(w, strings.Join(kindRows, "\n"))
	fmt.Fprintln(w, "};")
	fmt.Fprintln(w, "const size_t luna_ds_sch_n_kinds = sizeof luna_ds_sch_kinds / sizeof *luna_ds_sch_kinds;")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "/* Immutable fields: where kube's validation enforces each is named in")
	fmt.Fprintln(w, " * spec/kube/kubernetes/apischema/main.go. */")
	fmt.Fprintln(w, "const luna_ds_sch_immutable luna_ds_sch_immutables[] = {")
	for _, im := range immutables {
		how, show, names := "LUNA_SCH_IMMUTABLE", "LUNA_SCH_SHOW_VALUE", ""
		switch im.how {
		case "locked":
			how = "LUNA_SCH_LOCKED"
		case "field null":
			show = "LUNA_SCH_SHOW_NULL"
		case "field go":
			show, names = "LUNA_SCH_SHOW_GO", goNames(kinds, im.group, im.kind, im.path)
		}
		fmt.Fprintf(w, "    { %q, %q, %q, %s, %s, %q, %q },\n", im.group, im.kind, im.path, how, show, names,
			absentAs[im.kind+"."+im.path])
	}
	fmt.Fprintln(w, "};")
	fmt.Fprintln(w, "const size_t luna_ds_sch_n_immutables = sizeof luna_ds_sch_immutables / sizeof *luna_ds_sch_immutables;")
	fmt.Fprintf(os.Stderr, "apischema: %d kinds, %d structs, %d fields, %d enums\n", len(kinds), len(order), nfields, len(enumOrd))
}
