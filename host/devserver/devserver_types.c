/* devserver_types.c — see devserver_types.h. */
#include "devserver/devserver_types.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devserver/devserver_resources.h"
#include "devserver/devserver_store.h"

struct luna_ds_types {
    luna_ds_type *head;       /* registration order = discovery order */
    luna_ds_store *store;     /* where new collections come from */
};

static const char *const pod_fields[] = { "spec.nodeName", "spec.restartPolicy",
    "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork",
    "status.phase", "status.podIP", "status.nominatedNodeName", NULL };
static const char *const event_fields[] = { "involvedObject.kind",
    "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
    "involvedObject.apiVersion", "involvedObject.resourceVersion",
    "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type", NULL };
static const char *const event_v1_fields[] = { "regarding.kind",
    "regarding.namespace", "regarding.name", "regarding.uid",
    "regarding.apiVersion", "regarding.resourceVersion", "regarding.fieldPath",
    "reason", "reportingController", "type", NULL };
static const char *const secret_fields[] = { "type", NULL };
static const char *const namespace_fields[] = { "status.phase", NULL };
static const char *const service_fields[] = { "spec.clusterIP", "spec.type", NULL };
static const char *const job_fields[] = { "status.successful", NULL };

static json_t *strings(const char *csv)
{
    json_t *a = json_array();
    if (!csv)
        return a;
    const char *p = csv;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        json_array_append_new(a, json_stringn(p, n));
        p += n;
        if (*p == ',')
            p++;
    }
    return a;
}

static void type_free(luna_ds_type *t)
{
    free(t->group);
    free(t->version);
    free(t->api_version);
    free(t->resource);
    free(t->singular);
    free(t->kind);
    free(t->list_kind);
    free(t->crd_name);
    json_decref(t->short_names);
    json_decref(t->categories);
    json_decref(t->schema);
    free(t);
}

/* A copy of s ("" for NULL); *ok becomes false when out of memory. */
static char *dup_str(const char *s, bool *ok)
{
    char *d = strdup(s ? s : "");
    if (!d)
        *ok = false;
    return d;
}

/* A new type (not yet registered), or NULL when out of memory. */
static luna_ds_type *new_type(const char *group, const char *version, const char *resource,
                              const char *singular, const char *kind, bool namespaced)
{
    luna_ds_type *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    bool ok = true;
    t->group = dup_str(group, &ok);
    t->version = dup_str(version, &ok);
    char av[512];
    if (*group)
        snprintf(av, sizeof av, "%s/%s", group, version);
    else
        snprintf(av, sizeof av, "%s", version);
    t->api_version = dup_str(av, &ok);
    t->resource = dup_str(resource, &ok);
    t->singular = dup_str(singular, &ok);
    t->kind = dup_str(kind, &ok);
    char lk[300];
    snprintf(lk, sizeof lk, "%sList", kind);
    t->list_kind = dup_str(lk, &ok);
    t->namespaced = namespaced;
    t->served = true;
    t->storage = true;
    if (!ok) {
        type_free(t);
        return NULL;
    }
    return t;
}

static void append(luna_ds_types *reg, luna_ds_type *t)
{
    luna_ds_type **p = &reg->head;
    while (*p)
        p = &(*p)->next;
    *p = t;
}

/* The built-in kinds whose update strategy differs from the common one
 * (AllowUnconditionalUpdate true, AllowCreateOnUpdate false), as
 * "GROUP/RESOURCE" ("/RESOURCE" for core), from k8s.io/kubernetes
 * pkg/registry/.../strategy.go (v1.37), kube-aggregator and
 * apiextensions-apiserver.  Hand-kept: discovery does not say it (a kind missing
 * here gets the common answer). */
static const char *const conditional_update_only[] = {
    "admissionregistration.k8s.io/mutatingadmissionpolicies",
    "admissionregistration.k8s.io/mutatingadmissionpolicybindings",
    "admissionregistration.k8s.io/mutatingwebhookconfigurations",
    "admissionregistration.k8s.io/validatingadmissionpolicies",
    "admissionregistration.k8s.io/validatingadmissionpolicybindings",
    "admissionregistration.k8s.io/validatingwebhookconfigurations",
    "apiextensions.k8s.io/customresourcedefinitions",
    "apiregistration.k8s.io/apiservices",
    "certificates.k8s.io/clustertrustbundles",
    "certificates.k8s.io/podcertificaterequests",
    "coordination.k8s.io/leasecandidates",
    "coordination.k8s.io/leases",
    "internal.apiserver.k8s.io/storageversions",
    "node.k8s.io/runtimeclasses",
    "policy/poddisruptionbudgets",
    "resource.k8s.io/resourcepoolstatusrequests",
    "scheduling.k8s.io/compositepodgroups",
    "scheduling.k8s.io/podgroups",
    "scheduling.k8s.io/workloads",
    "storage.k8s.io/csidrivers",
    "storage.k8s.io/csinodes",
    "storage.k8s.io/csistoragecapacities",
    "storage.k8s.io/volumeattachments",
    "storagemigration.k8s.io/storageversionmigrations",
    NULL,
};
static const char *const create_on_update[] = {
    "/endpoints", "/events", "/limitranges", "/services",
    "coordination.k8s.io/leasecandidates", "coordination.k8s.io/leases",
    "events.k8s.io/events", "node.k8s.io/runtimeclasses",
    "rbac.authorization.k8s.io/clusterrolebindings", "rbac.authorization.k8s.io/clusterroles",
    "rbac.authorization.k8s.io/rolebindings", "rbac.authorization.k8s.io/roles",
    NULL,
};

static bool in_update_list(const char *const *list, const char *group, const char *resource)
{
    size_t gl = strlen(group);
    for (; *list; list++)
        if (strncmp(*list, group, gl) == 0 && (*list)[gl] == '/' && strcmp(*list + gl + 1, resource) == 0)
            return true;
    return false;
}

/* A built-in type's update strategy (see luna_ds_type). */
static void set_update_strategy(luna_ds_type *t)
{
    t->unconditional_update = !in_update_list(conditional_update_only, t->group, t->resource);
    t->create_on_update = in_update_list(create_on_update, t->group, t->resource);
}

/* What discovery cannot say, kept by hand (the rest of every built-in
 * type comes from the generated table, devserver_resources.c):
 * - the field-selector paths kube-apiserver accepts beyond metadata.name
 *   and metadata.namespace (its strategies' GetAttrs);
 * - RETURN_DELETED: DELETE answers the object rather than a Status;
 * - generation: by default a kind with a status subresource counts spec
 *   changes in metadata.generation; NO_GENERATION and GENERATION override
 *   that where kube's strategy does otherwise (or where the dev server has
 *   always done otherwise: pods, services, namespaces);
 * - EVENTS_V1: events.k8s.io/v1 Events are the core Events seen through
 *   another version, with renamed fields (luna_ds_types_convert). */
enum { RETURN_DELETED = 1, NO_GENERATION = 2, GENERATION = 4, EVENTS_V1 = 8 };
static const struct kept_def {
    const char *group, *resource;
    int flags;
    const char *const *fields;
} kept[] = {
    { "", "events", 0, event_fields },
    { "", "namespaces", RETURN_DELETED | NO_GENERATION, namespace_fields },
    { "", "nodes", NO_GENERATION, NULL },
    { "", "persistentvolumeclaims", NO_GENERATION, NULL },
    { "", "persistentvolumes", NO_GENERATION, NULL },
    { "", "pods", RETURN_DELETED | NO_GENERATION, pod_fields },
    { "", "resourcequotas", NO_GENERATION, NULL },   /* seen on kube-apiserver (08-apiserver/13) */
    { "", "secrets", 0, secret_fields },
    { "", "services", RETURN_DELETED | NO_GENERATION, service_fields },
    { "admissionregistration.k8s.io", "mutatingwebhookconfigurations", GENERATION, NULL },
    { "admissionregistration.k8s.io", "validatingwebhookconfigurations", GENERATION, NULL },
    { "apiextensions.k8s.io", "customresourcedefinitions", RETURN_DELETED, NULL },
    { "batch", "jobs", 0, job_fields },
    { "events.k8s.io", "events", EVENTS_V1, event_v1_fields },
};

static const struct kept_def *kept_for(const char *group, const char *resource)
{
    for (size_t i = 0; i < sizeof kept / sizeof *kept; i++)
        if (strcmp(kept[i].group, group) == 0 && strcmp(kept[i].resource, resource) == 0)
            return &kept[i];
    return NULL;
}

/* Registers one type per row of the generated table, in its (kube's
 * discovery) order; rows stored alike share the collection of their
 * storage row.  0, or LUNA_ENOMEM. */
static int register_builtins(luna_ds_types *reg)
{
    size_t n = luna_ds_resources_len;
    luna_ds_type **by_row = calloc(n, sizeof *by_row);
    if (!by_row)
        return LUNA_ENOMEM;
    luna_ds_type *core_events = NULL;
    int rc = 0;
    /* storage rows first, so every other row finds its collection */
    for (int pass = 0; pass < 2 && rc == 0; pass++)
        for (size_t i = 0; i < n; i++) {
            const luna_ds_resource_def *d = &luna_ds_resources[i];
            const struct kept_def *k = kept_for(d->group, d->resource);
            int kf = k ? k->flags : 0;
            bool storage = (size_t)d->storage == i && !(kf & EVENTS_V1);
            if (storage != (pass == 0))
                continue;
            luna_ds_type *t = new_type(d->group, d->version, d->resource, d->singular, d->kind,
                                       d->namespaced);
            if (!t) {
                rc = LUNA_ENOMEM;
                break;
            }
            t->short_names = strings(d->shorts);
            t->categories = strings(d->categories);
            t->verbs = d->verbs;
            t->subs = d->subs;
            t->has_status = d->subs & LUNA_DS_SUB_STATUS;
            t->has_generation = (t->has_status || (kf & GENERATION)) && !(kf & NO_GENERATION);
            t->return_deleted = kf & RETURN_DELETED;
            t->fields = k ? k->fields : NULL;
            set_update_strategy(t);
            t->list_keys = &luna_ds_list_keys[d->keys_first];
            t->n_list_keys = d->keys_count;
            if (kf & EVENTS_V1) {
                t->conv = LUNA_DS_CONV_EVENTS_V1;
                t->coll = core_events ? core_events->coll : NULL;
            } else if (!storage) {
                t->coll = by_row[d->storage] ? by_row[d->storage]->coll : NULL;
            } else {
                t->coll = luna_ds_store_coll_new(reg->store);
            }
            t->storage = storage;
            if (!t->short_names || !t->categories || !t->coll) {
                if (storage)
                    luna_ds_store_coll_free(t->coll);
                type_free(t);
                rc = LUNA_ENOMEM;
                break;
            }
            by_row[i] = t;
            if (!*d->group && strcmp(d->resource, "events") == 0)
                core_events = t;
        }
    /* linked in the table's order: registration order is discovery order */
    for (size_t i = 0; i < n; i++)
        if (by_row[i])
            append(reg, by_row[i]);
    free(by_row);
    return rc;
}

luna_ds_types *luna_ds_types_new(luna_ds_store *store)
{
    luna_ds_types *reg = calloc(1, sizeof *reg);
    if (!reg)
        return NULL;
    reg->store = store;
    if (register_builtins(reg) < 0) {
        luna_ds_types_free(reg);
        return NULL;
    }
    return reg;
}

/* The storage-version type of a collection. */
static luna_ds_type *storage_type(const luna_ds_types *reg, const struct luna_ds_coll *coll)
{
    for (luna_ds_type *t = reg->head; t; t = t->next)
        if (t->coll == coll && t->storage)
            return t;
    return NULL;
}

luna_ds_type *luna_ds_types_storage_of(const luna_ds_types *reg, luna_ds_type *t)
{
    luna_ds_type *s = storage_type(reg, t->coll);
    return s ? s : t;
}

static luna_ds_type *find_storage_type(const luna_ds_types *reg, const char *group,
                                       const char *resource)
{
    for (luna_ds_type *t = reg->head; t; t = t->next)
        if (t->storage && strcmp(t->group, group) == 0 && strcmp(t->resource, resource) == 0)
            return t;
    return NULL;
}

luna_ds_type *luna_ds_types_namespaces(const luna_ds_types *reg)
{
    return find_storage_type(reg, "", "namespaces");
}

luna_ds_type *luna_ds_types_all(const luna_ds_types *reg) { return reg->head; }

luna_ds_type *luna_ds_types_find(const luna_ds_types *reg, const char *group, const char *version, const char *resource)
{
    for (luna_ds_type *t = reg->head; t; t = t->next)
        if (t->served && strcmp(t->group, group) == 0 && strcmp(t->version, version) == 0 &&
            strcmp(t->resource, resource) == 0)
            return t;
    return NULL;
}

luna_ds_type *luna_ds_types_find_kind(const luna_ds_types *reg, const char *api_version, const char *kind)
{
    for (luna_ds_type *t = reg->head; t; t = t->next)
        if (t->served && strcmp(t->api_version, api_version) == 0 && strcmp(t->kind, kind) == 0)
            return t;
    return NULL;
}

/* ---- discovery ---- */

json_t *luna_ds_types_api_versions(const char *server_address)
{
    json_t *o = json_object();
    json_object_set_new(o, "kind", json_string("APIVersions"));
    json_t *v = json_array();
    json_array_append_new(v, json_string("v1"));
    json_object_set_new(o, "versions", v);
    json_t *cidrs = json_array();
    json_t *c = json_object();
    json_object_set_new(c, "clientCIDR", json_string("0.0.0.0/0"));
    json_object_set_new(c, "serverAddress", json_string(server_address));
    json_array_append_new(cidrs, c);
    json_object_set_new(o, "serverAddressByClientCIDRs", cidrs);
    return o;
}

static json_t *group_version(const char *group, const char *version)
{
    json_t *gv = json_object();
    char buf[512];
    snprintf(buf, sizeof buf, "%s/%s", group, version);
    json_object_set_new(gv, "groupVersion", json_string(buf));
    json_object_set_new(gv, "version", json_string(version));
    return gv;
}

/* The element of arr whose field is value, or NULL. */
static json_t *listed(const json_t *arr, const char *field, const char *value)
{
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e) {
        const char *s = json_string_value(json_object_get(e, field));
        if (s && strcmp(s, value) == 0)
            return e;
    }
    return NULL;
}

/* Versions of `group` in registration order, each once; NULL if none. */
static json_t *group_doc(const luna_ds_types *reg, const char *group)
{
    json_t *versions = json_array();
    for (luna_ds_type *t = reg->head; t; t = t->next) {
        if (!t->served || strcmp(t->group, group) != 0)
            continue;
        if (!listed(versions, "version", t->version))
            json_array_append_new(versions, group_version(group, t->version));
    }
    if (json_array_size(versions) == 0) {
        json_decref(versions);
        return NULL;
    }
    json_t *g = json_object();
    json_object_set_new(g, "name", json_string(group));
    json_object_set_new(g, "versions", versions);
    /* Preferred: a built-in group's first version (the generated table is
     * in kube's order, preferred first); a CRD group's storage version, as
     * kube prefers it. */
    json_t *pref = json_array_get(versions, 0);
    for (luna_ds_type *t = reg->head; t; t = t->next)
        if (t->served && t->storage && t->custom && strcmp(t->group, group) == 0) {
            json_t *v = listed(versions, "version", t->version);
            if (v)
                pref = v;
            break;
        }
    json_object_set(g, "preferredVersion", pref);
    return g;
}

json_t *luna_ds_types_group_list(const luna_ds_types *reg)
{
    json_t *o = json_object();
    json_object_set_new(o, "kind", json_string("APIGroupList"));
    json_object_set_new(o, "apiVersion", json_string("v1"));
    json_t *groups = json_array();
    for (luna_ds_type *t = reg->head; t; t = t->next) {
        if (!t->served || !*t->group)
            continue;
        if (!listed(groups, "name", t->group)) {
            json_t *doc = group_doc(reg, t->group);
            if (doc)
                json_array_append_new(groups, doc);
        }
    }
    json_object_set_new(o, "groups", groups);
    return o;
}

json_t *luna_ds_types_group(const luna_ds_types *reg, const char *group)
{
    if (!*group)
        return NULL;
    json_t *g = group_doc(reg, group);
    if (!g)
        return NULL;
    json_t *o = json_object();
    json_object_set_new(o, "kind", json_string("APIGroup"));
    json_object_set_new(o, "apiVersion", json_string("v1"));
    json_object_update(o, g);
    json_decref(g);
    return o;
}

/* The verbs of a mask, in kube's (alphabetical) order. */
static json_t *verbs(unsigned mask)
{
    static const char *const names[] = { "create", "delete", "deletecollection", "get",
                                         "list", "patch", "update", "watch" };
    json_t *a = json_array();
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (mask & (1u << i))
            json_array_append_new(a, json_string(names[i]));
    return a;
}

/* The subresources the dev server serves, as kube describes them. */
static const struct sub_def {
    unsigned flag;
    const char *name, *group, *version, *kind; /* group NULL: the resource's own kind */
    unsigned verbs;
} sub_defs[] = {
    { LUNA_DS_SUB_SCALE, "scale", "autoscaling", "v1", "Scale",
      LUNA_DS_VERB_GET | LUNA_DS_VERB_PATCH | LUNA_DS_VERB_UPDATE },
    { LUNA_DS_SUB_STATUS, "status", NULL, NULL, NULL,
      LUNA_DS_VERB_GET | LUNA_DS_VERB_PATCH | LUNA_DS_VERB_UPDATE },
    { LUNA_DS_SUB_TOKEN, "token", "authentication.k8s.io", "v1", "TokenRequest",
      LUNA_DS_VERB_CREATE },
};

json_t *luna_ds_types_resource_list(const luna_ds_types *reg, const char *group,
                                    const char *version)
{
    json_t *res = json_array();
    bool any = false;
    for (luna_ds_type *t = reg->head; t; t = t->next) {
        if (!t->served || strcmp(t->group, group) != 0 || strcmp(t->version, version) != 0)
            continue;
        any = true;
        json_t *r = json_object();
        json_object_set_new(r, "name", json_string(t->resource));
        json_object_set_new(r, "singularName", json_string(t->singular));
        json_object_set_new(r, "namespaced", json_boolean(t->namespaced));
        json_object_set_new(r, "kind", json_string(t->kind));
        json_object_set_new(r, "verbs", verbs(t->verbs));
        if (json_array_size(t->short_names))
            json_object_set(r, "shortNames", t->short_names);
        if (json_array_size(t->categories))
            json_object_set(r, "categories", t->categories);
        json_array_append_new(res, r);
        for (size_t i = 0; i < sizeof sub_defs / sizeof *sub_defs; i++) {
            const struct sub_def *d = &sub_defs[i];
            if (!(t->subs & d->flag))
                continue;
            char name[300];
            snprintf(name, sizeof name, "%s/%s", t->resource, d->name);
            json_t *s = json_object();
            json_object_set_new(s, "name", json_string(name));
            json_object_set_new(s, "singularName", json_string(""));
            json_object_set_new(s, "namespaced", json_boolean(t->namespaced));
            if (d->group) {
                json_object_set_new(s, "group", json_string(d->group));
                json_object_set_new(s, "version", json_string(d->version));
            }
            json_object_set_new(s, "kind", json_string(d->kind ? d->kind : t->kind));
            json_object_set_new(s, "verbs", verbs(d->verbs));
            json_array_append_new(res, s);
        }
    }
    if (!any) {
        json_decref(res);
        return NULL;
    }
    json_t *o = json_object();
    json_object_set_new(o, "kind", json_string("APIResourceList"));
    json_object_set_new(o, "apiVersion", json_string("v1"));
    char gv[512];
    if (*group)
        snprintf(gv, sizeof gv, "%s/%s", group, version);
    else
        snprintf(gv, sizeof gv, "%s", version);
    json_object_set_new(o, "groupVersion", json_string(gv));
    json_object_set_new(o, "resources", res);
    return o;
}

/* ---- aggregated discovery ---- */

bool luna_ds_types_wants_aggregated(const char *accept)
{
    /* kubectl: "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;
     * as=APIGroupDiscoveryList,application/json;g=...;v=v2;as=...,application/json":
     * the JSON form is answered when it is accepted at all (protobuf is not). */
    if (!accept)
        return false;
    for (const char *p = accept; (p = strstr(p, "application/json")) != NULL; p++) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char one[200];
        size_t k = 0;
        for (size_t i = 0; i < n && k + 1 < sizeof one; i++)
            if (p[i] != ' ')
                one[k++] = p[i];
        one[k] = '\0';
        if (strstr(one, ";g=apidiscovery.k8s.io") && strstr(one, ";v=v2;") &&
            strstr(one, ";as=APIGroupDiscoveryList"))
            return true;
    }
    return false;
}

static json_t *gvk_doc(const char *group, const char *version, const char *kind)
{
    return json_pack("{s:s,s:s,s:s}", "group", group, "version", version, "kind", kind);
}

static json_t *aggregated_resource(const luna_ds_type *t)
{
    json_t *r = json_pack("{s:s,s:o,s:s,s:s,s:o}", "resource", t->resource, "responseKind",
                          gvk_doc(t->group, t->version, t->kind), "scope",
                          t->namespaced ? "Namespaced" : "Cluster", "singularResource",
                          t->singular, "verbs", verbs(t->verbs));
    if (!r)
        return NULL;
    if (json_array_size(t->short_names))
        json_object_set(r, "shortNames", t->short_names);
    if (json_array_size(t->categories))
        json_object_set(r, "categories", t->categories);
    json_t *subs = json_array();
    for (size_t i = 0; i < sizeof sub_defs / sizeof *sub_defs; i++) {
        const struct sub_def *d = &sub_defs[i];
        if (!(t->subs & d->flag))
            continue;
        json_t *kind = d->group ? gvk_doc(d->group, d->version, d->kind)
                                : gvk_doc(t->group, t->version, t->kind);
        json_array_append_new(subs, json_pack("{s:s,s:o,s:o}", "subresource", d->name,
                                              "responseKind", kind, "verbs", verbs(d->verbs)));
    }
    if (json_array_size(subs))
        json_object_set_new(r, "subresources", subs);
    else
        json_decref(subs);
    return r;
}

/* One APIGroupDiscovery: the group's versions in registration order. */
static json_t *aggregated_group(const luna_ds_types *reg, const char *group)
{
    json_t *versions = json_array();
    for (luna_ds_type *t = reg->head; t; t = t->next) {
        if (!t->served || strcmp(t->group, group) != 0)
            continue;
        json_t *v = listed(versions, "version", t->version);
        if (!v) {
            v = json_pack("{s:s,s:[],s:s}", "version", t->version, "resources", "freshness",
                          "Current");
            json_array_append_new(versions, v);
        }
        json_array_append_new(json_object_get(v, "resources"), aggregated_resource(t));
    }
    json_t *md = json_pack("{s:n}", "creationTimestamp");
    if (*group)
        json_object_set_new(md, "name", json_string(group));
    return json_pack("{s:o,s:o}", "metadata", md, "versions", versions);
}

json_t *luna_ds_types_aggregated(const luna_ds_types *reg, bool core)
{
    json_t *items = json_array();
    if (core) {
        json_array_append_new(items, aggregated_group(reg, ""));
    } else {
        json_t *seen = json_array();
        for (luna_ds_type *t = reg->head; t; t = t->next) {
            if (!t->served || !*t->group || listed(seen, "name", t->group))
                continue;
            json_array_append_new(seen, json_pack("{s:s}", "name", t->group));
            json_array_append_new(items, aggregated_group(reg, t->group));
        }
        json_decref(seen);
    }
    return json_pack("{s:s,s:s,s:{},s:o}", "kind", "APIGroupDiscoveryList", "apiVersion",
                     "apidiscovery.k8s.io/v2", "metadata", "items", items);
}

/* ---- OpenAPI v3 (for kubectl) ---- */

static void gv_path(const luna_ds_type *t, char *out, size_t n)
{
    if (*t->group)
        snprintf(out, n, "apis/%s/%s", t->group, t->version);
    else
        snprintf(out, n, "api/%s", t->version);
}

json_t *luna_ds_types_openapi_index(const luna_ds_types *reg)
{
    json_t *paths = json_object();
    /* the hash changes when the served types change, so clients refetch */
    unsigned long h = 5381;
    for (luna_ds_type *u = reg->head; u; u = u->next)
        if (u->served)
            for (const char *c = u->resource; *c; c++)
                h = h * 33 + (unsigned char)*c;
    for (luna_ds_type *t = reg->head; t; t = t->next) {
        if (!t->served)
            continue;
        char p[512], url[600];
        gv_path(t, p, sizeof p);
        snprintf(url, sizeof url, "/openapi/v3/%s?hash=%08lX", p, h & 0xffffffffUL);
        json_object_set_new(paths, p, json_pack("{s:s}", "serverRelativeURL", url));
    }
    return json_pack("{s:o}", "paths", paths);
}

json_t *luna_ds_types_openapi_gv(const luna_ds_types *reg, const char *gvpath)
{
    json_t *paths = json_object();
    bool any = false;
    for (luna_ds_type *t = reg->head; t; t = t->next) {
        char p[512];
        gv_path(t, p, sizeof p);
        if (!t->served || strcmp(p, gvpath) != 0)
            continue;
        any = true;
        char path[900];
        if (t->namespaced)
            snprintf(path, sizeof path, "/%s/namespaces/{namespace}/%s/{name}", p, t->resource);
        else
            snprintf(path, sizeof path, "/%s/%s/{name}", p, t->resource);
        json_t *gvk = json_pack("{s:s,s:s,s:s}", "group", t->group, "version", t->version,
                                "kind", t->kind);
        json_t *params = json_pack("[{s:s,s:s,s:s,s:{s:s,s:b}}]", "name", "fieldValidation",
                                   "in", "query", "description",
                                   "how the server handles unknown or duplicate fields",
                                   "schema", "type", "string", "uniqueItems", 1);
        char opid[600];
        snprintf(opid, sizeof opid, "patch%s", t->kind);
        json_t *op = json_pack("{s:s,s:o,s:{s:{s:s}},s:o,s:s}", "operationId", opid,
                               "parameters", params, "responses", "200", "description", "OK",
                               "x-kubernetes-group-version-kind", gvk,
                               "x-kubernetes-action", "patch");
        json_object_set_new(paths, path, json_pack("{s:o}", "patch", op));
    }
    if (!any) {
        json_decref(paths);
        return NULL;
    }
    return json_pack("{s:s,s:{s:s,s:s},s:o,s:{s:{}}}", "openapi", "3.0.0", "info", "title",
                     "Kubernetes", "version", "v1.37.2", "paths", paths, "components", "schemas");
}

/* ---- CRDs ---- */

static const char *str_at(const json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int crd_invalid(luna_ds_status *st, const char *name, const char *field,
                       const char *what)
{
    return luna_ds_status_invalid(st, "apiextensions.k8s.io", "CustomResourceDefinition",
                                  name, "FieldValueRequired", field, "%s", what);
}

int luna_ds_types_crd_validate(const luna_ds_types *reg, const json_t *crd, luna_ds_status *st)
{
    const char *name = str_at(json_object_get(crd, "metadata"), "name");
    json_t *spec = json_object_get(crd, "spec");
    const char *group = str_at(spec, "group");
    json_t *names = json_object_get(spec, "names");
    const char *plural = str_at(names, "plural");
    const char *kind = str_at(names, "kind");
    const char *scope = str_at(spec, "scope");
    json_t *versions = json_object_get(spec, "versions");
    if (!group || !*group)
        return crd_invalid(st, name, "spec.group", "Required value");
    if (!plural || !*plural)
        return crd_invalid(st, name, "spec.names.plural", "Required value");
    if (!kind || !*kind)
        return crd_invalid(st, name, "spec.names.kind", "Required value");
    if (!scope || (strcmp(scope, "Namespaced") != 0 && strcmp(scope, "Cluster") != 0))
        return luna_ds_status_invalid(st, "apiextensions.k8s.io", "CustomResourceDefinition",
                                      name, "FieldValueNotSupported", "spec.scope",
                                      "Unsupported value: \"%s\": supported values: "
                                      "\"Cluster\", \"Namespaced\"", scope ? scope : "");
    char want[600];
    snprintf(want, sizeof want, "%s.%s", plural, group);
    if (!name || strcmp(name, want) != 0)
        return luna_ds_status_invalid(st, "apiextensions.k8s.io", "CustomResourceDefinition",
                                      name, "FieldValueInvalid", "metadata.name",
                                      "Invalid value: \"%s\": must be spec.names.plural+\".\"+spec.group",
                                      name ? name : "");
    if (!json_is_array(versions) || json_array_size(versions) == 0)
        return crd_invalid(st, name, "spec.versions", "Required value: must have exactly one version marked as storage version");
    int nstorage = 0;
    size_t i;
    json_t *v;
    json_array_foreach(versions, i, v) {
        if (!str_at(v, "name"))
            return crd_invalid(st, name, "spec.versions[].name", "Required value");
        if (json_is_true(json_object_get(v, "storage")))
            nstorage++;
    }
    if (nstorage != 1)
        return luna_ds_status_invalid(st, "apiextensions.k8s.io", "CustomResourceDefinition",
                                      name, "FieldValueInvalid", "spec.versions",
                                      "Invalid value: must have exactly one version marked as storage version");
    /* The resource must not already be served by a built-in or another CRD. */
    for (luna_ds_type *t = reg->head; t; t = t->next)
        if (t->served && strcmp(t->group, group) == 0 && strcmp(t->resource, plural) == 0 &&
            (!t->custom || strcmp(t->crd_name, name) != 0))
            return luna_ds_status_invalid(st, "apiextensions.k8s.io", "CustomResourceDefinition",
                                          name, "FieldValueInvalid", "spec.names.plural",
                                          "Invalid value: \"%s\": resource is already served", plural);
    return 0;
}

int luna_ds_types_crd_sync(luna_ds_types *reg, const json_t *crd)
{
    const char *name = str_at(json_object_get(crd, "metadata"), "name");
    json_t *spec = json_object_get(crd, "spec");
    const char *group = str_at(spec, "group");
    json_t *names = json_object_get(spec, "names");
    const char *plural = str_at(names, "plural");
    const char *kind = str_at(names, "kind");
    const char *singular = str_at(names, "singular");
    const char *list_kind = str_at(names, "listKind");
    bool namespaced = strcmp(str_at(spec, "scope"), "Namespaced") == 0;
    char lower[256];
    if (!singular) {
        size_t n = strlen(kind);
        if (n >= sizeof lower)
            n = sizeof lower - 1;
        for (size_t i = 0; i < n; i++)
            lower[i] = (char)(kind[i] >= 'A' && kind[i] <= 'Z' ? kind[i] + 32 : kind[i]);
        lower[n] = '\0';
        singular = lower;
    }
    /* The collection shared by every version of this CRD (reused if it
     * existed before under the same name, so old history stays valid). */
    struct luna_ds_coll *coll = NULL;
    for (luna_ds_type *t = reg->head; t; t = t->next)
        if (t->custom && strcmp(t->crd_name, name) == 0 && strcmp(t->group, group) == 0 &&
            strcmp(t->resource, plural) == 0)
            coll = t->coll;
    if (!coll && !(coll = luna_ds_store_coll_new(reg->store)))
        return LUNA_ENOMEM;
    for (luna_ds_type *t = reg->head; t; t = t->next)
        if (t->custom && strcmp(t->crd_name, name) == 0)
            t->served = false;
    json_t *versions = json_object_get(spec, "versions");
    int rc = 0;
    size_t i;
    json_t *v;
    json_array_foreach(versions, i, v) {
        const char *ver = str_at(v, "name");
        bool served = !json_is_false(json_object_get(v, "served"));
        luna_ds_type *t = NULL;
        for (luna_ds_type *u = reg->head; u; u = u->next)
            if (u->custom && strcmp(u->crd_name, name) == 0 && strcmp(u->version, ver) == 0 &&
                strcmp(u->group, group) == 0 && strcmp(u->resource, plural) == 0 &&
                strcmp(u->kind, kind) == 0 && u->namespaced == namespaced)
                t = u;
        if (!t) {
            t = new_type(group, ver, plural, singular, kind, namespaced);
            if (!t || !(t->crd_name = strdup(name))) {
                if (t)
                    type_free(t);
                rc = LUNA_ENOMEM;
                continue;
            }
            t->custom = true;
            t->coll = coll;
            t->short_names = json_array();
            t->categories = json_array();
            append(reg, t);
        }
        char *lk = list_kind ? strdup(list_kind) : NULL;
        if (lk) {
            free(t->list_kind);
            t->list_kind = lk;
        }
        json_decref(t->short_names);
        json_t *sn = json_object_get(names, "shortNames");
        t->short_names = json_is_array(sn) ? json_deep_copy(sn) : json_array();
        json_decref(t->categories);
        json_t *cat = json_object_get(names, "categories");
        t->categories = json_is_array(cat) ? json_deep_copy(cat) : json_array();
        t->served = served;
        t->storage = json_is_true(json_object_get(v, "storage"));
        t->has_generation = true;
        t->return_deleted = true;
        json_t *sub = json_object_get(v, "subresources");
        t->has_status = json_object_get(sub, "status") != NULL;
        t->verbs = LUNA_DS_VERBS_ALL;
        t->subs = t->has_status ? LUNA_DS_SUB_STATUS : 0;
        json_decref(t->schema);
        json_t *sch = json_object_get(json_object_get(v, "schema"), "openAPIV3Schema");
        t->schema = json_is_object(sch) ? json_deep_copy(sch) : NULL;
    }
    return rc;
}

void luna_ds_types_crd_remove(luna_ds_types *reg, const char *crd_name)
{
    for (luna_ds_type *t = reg->head; t; t = t->next)
        if (t->custom && strcmp(t->crd_name, crd_name) == 0)
            t->served = false;
}

/* ---- conversion ---- */

/* core/v1 Event field → events.k8s.io/v1 field */
static const char *const event_renames[][2] = {
    { "involvedObject", "regarding" },
    { "message", "note" },
    { "source", "deprecatedSource" },
    { "firstTimestamp", "deprecatedFirstTimestamp" },
    { "lastTimestamp", "deprecatedLastTimestamp" },
    { "count", "deprecatedCount" },
    { "reportingComponent", "reportingController" },
};

static void rename_fields(json_t *doc, int from, int to)
{
    size_t n = sizeof event_renames / sizeof event_renames[0];
    json_t *moved = json_object();
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_object_get(doc, event_renames[i][from]);
        if (v) {
            json_object_set(moved, event_renames[i][to], v);
            json_object_del(doc, event_renames[i][from]);
        }
    }
    json_object_update(doc, moved);
    json_decref(moved);
}

void luna_ds_types_convert(json_t *doc, const luna_ds_type *from, const luna_ds_type *to)
{
    if (from == to)
        return;
    if (from->conv != to->conv) {
        if (to->conv == LUNA_DS_CONV_EVENTS_V1)
            rename_fields(doc, 0, 1);
        else
            rename_fields(doc, 1, 0);
    }
    json_object_set_new(doc, "apiVersion", json_string(to->api_version));
}

void luna_ds_types_free(luna_ds_types *reg)
{
    if (!reg)
        return;
    luna_ds_type *t = reg->head;
    while (t) {
        luna_ds_type *next = t->next;
        /* A collection is freed by its last type only (versions share it). */
        bool owner = true;
        for (luna_ds_type *u = next; u && owner; u = u->next)
            if (u->coll == t->coll)
                owner = false;
        if (owner)
            luna_ds_store_coll_free(t->coll);
        type_free(t);
        t = next;
    }
    free(reg);
}
