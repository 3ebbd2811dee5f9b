---@meta luna
-- LuaLS definitions of luna's script API (`luna stubs DIR` writes these
-- files; spec/19-authoring/02-stubs_spec.lua checks them against the
-- runtime).  The user's guide: README.md "Writing a controller".

---A Kubernetes object as a Lua table (decoded JSON).
---@alias luna.Object table<string, any>

---A kind: "v1/ConfigMap", "apps/v1/Deployment", "example.com/v1/Widget".
---@alias luna.Kind string

---A label selector: "a=b,c!=d" or { a = "b" }.
---@alias luna.Labels string|table<string, string>

---An event source: a kind, or a kind with a namespace and selectors.
---@class luna.Source
---@field [1] luna.Kind
---@field namespace? string
---@field labels? luna.Labels
---@field fields? string field selector text
---@field metadata_only? boolean cache only apiVersion, kind and metadata (PartialObjectMetadata): for big kinds (Pods, Secrets) whose bodies the controller never reads

---A `watches` source: objects of a kind mapped to keys of the primary kind.
---@class luna.WatchesSource: luna.Source
---@field map fun(obj: luna.Object): (string|{namespace?: string, name: string}|(string|{namespace?: string, name: string})[]|nil) "ns/name", a key table, a list of them, or nil

---A predicate's event.
---@class luna.PredicateEvent
---@field type "add"|"update"|"delete"
---@field old? luna.Object the previous object (updates)
---@field object luna.Object

---@alias luna.Predicate fun(ev: luna.PredicateEvent): boolean

---What `reconcile` is called with.
---@class luna.Request
---@field namespace string|nil nil for cluster-scoped kinds
---@field name string
---@field key string "namespace/name" or "name"
---@field attempt integer 1 on the first try, counting retries
---@field periodic? true set (and key is "@every") for the periodic run of a controller with `every`

---What `reconcile` returns: nothing or true (done), `{ requeue = true }`
---(again, rate limited), `{ requeue_after = s }` (again in s seconds), or
---`nil, err` / `false` / an error (retried with per-key backoff).  A retry
---keeps the priority the key was reconciled at unless `priority` says otherwise.
---@alias luna.Result nil|true|false|luna.Requeue

---The table form of a result.
---@class luna.Requeue
---@field requeue? boolean again, rate limited
---@field requeue_after? number again in this many seconds (0..1e9)
---@field priority? integer the requeue's priority (-1e9..1e9; higher first; first lists and resyncs are -100, live events 0)

---Watchdog budgets between two yields (0: none).
---@class luna.Limits
---@field instructions? number Lua VM instructions (> 0, at most --reconcile-instruction-limit)
---@field seconds? number wall-clock seconds (> 0, at most --reconcile-time-limit)
---@field memory? number MiB of the Lua heap this controller may hold (> 0, at most --controller-memory-limit)

---Retry backoff and overall rate of the workqueue.
---@class luna.RateLimit
---@field base_delay? number seconds of the first retry
---@field max_delay? number seconds at most between retries
---@field qps? number overall requeue rate
---@field burst? integer overall burst

---A controller's spec (validated by luna.controller at load time).
---@class luna.ControllerSpec
---@field name string DNS-style, unique
---@field watch luna.Kind|luna.Source the primary kind: its keys are reconciled
---@field owns? (luna.Kind|luna.Source)[] children: their controller owner's key is enqueued
---@field watches? luna.WatchesSource[] any kind, mapped to keys by `map`
---@field indexes? table<string, fun(obj: luna.Object): (string|string[]|nil)> custom indexes of the primary kind (cache:by_index)
---@field predicates? luna.Predicate[] filters of primary events; all must pass
---@field workers? integer reconciles in flight at most (1..1024, default 1)
---@field resync? number seconds between full resyncs (0: never)
---@field rate_limit? luna.RateLimit retry backoff and overall rate
---@field limits? luna.Limits lower watchdog budgets between two yields (> 0, at most the flags)
---@field keep_managed_fields? boolean keep metadata.managedFields in the caches (dropped by default)
---@field priority_queue? boolean live events before first-list and resync keys (default true); false: one FIFO
---@field every? number|string periodic work: seconds (1..31536000) or a cron schedule ("*/5 * * * *"); reconcile then also gets req.periodic
---@field jitter? number each tick up to this fraction (0..1) of the period late, at random; only with `every`
---@field webhooks? luna.Webhook[] admission webhooks and converters served with this controller (docs/webhooks.md)
---@field reconcile fun(req: luna.Request): luna.Result, luna.Error|string|nil

---One rule of the requests a webhook sees (admissionregistration.k8s.io/v1 RuleWithOperations).
---@class luna.WebhookRule
---@field api_groups string[] "" is the core group; "*" any
---@field api_versions string[]
---@field resources string[] "widgets", "pods/status", "*"
---@field operations ("CREATE"|"UPDATE"|"DELETE"|"CONNECT"|"*")[]
---@field scope? "*"|"Cluster"|"Namespaced" default "*"

---A label selector of a webhook (namespaceSelector, objectSelector); empty: everything.
---@class luna.WebhookSelector
---@field match_labels? table<string, string>
---@field match_expressions? {key: string, operator: "In"|"NotIn"|"Exists"|"DoesNotExist", values?: string[]}[]

---An AdmissionReview request, as a webhook function gets it.
---@class luna.AdmissionRequest
---@field uid string
---@field operation "CREATE"|"UPDATE"|"DELETE"|"CONNECT"
---@field kind {group: string, version: string, kind: string}
---@field resource {group: string, version: string, resource: string}
---@field sub_resource? string
---@field request_kind? {group: string, version: string, kind: string}
---@field request_resource? {group: string, version: string, resource: string}
---@field request_sub_resource? string
---@field name? string
---@field namespace? string
---@field user_info {username: string, uid?: string, groups?: string[], extra?: table}
---@field object? luna.Object nil for DELETE
---@field old_object? luna.Object UPDATE and DELETE
---@field dry_run boolean
---@field options? table

---What a webhook function answers: nothing or true (allowed), false and a message (denied, code 403), or this table.
---@class luna.AdmissionAnswer
---@field allowed? boolean default true
---@field message? string
---@field code? integer HTTP status of a denial (default 403)
---@field reason? string
---@field warnings? string[]

---@class luna.WebhookSpec
---@field name string a DNS subdomain of three or more segments ("widgets.validate.example.com")
---@field validate? fun(req: luna.AdmissionRequest): (boolean|luna.AdmissionAnswer|nil), string|nil
---@field mutate? fun(req: luna.AdmissionRequest, obj: luna.Object): (boolean|luna.AdmissionAnswer|nil), string|nil change obj (a copy of req.object); luna sends the JSON patch
---@field rules luna.WebhookRule[]
---@field namespace_selector? luna.WebhookSelector
---@field object_selector? luna.WebhookSelector
---@field failure_policy? "Fail"|"Ignore" default "Fail"
---@field side_effects? "None"|"NoneOnDryRun" default "None"
---@field timeout_seconds? integer 1..30, default 10
---@field match_policy? "Equivalent"|"Exact" default "Equivalent"
---@field reinvocation_policy? "Never"|"IfNeeded" mutating only, default "Never"

---One version of a CRD other than the hub: both directions, each given a copy of the object and returning the converted one (or nothing: the copy it changed); luna sets apiVersion.
---@class luna.ConverterSpoke
---@field to_hub fun(obj: luna.Object): luna.Object|nil this version → the hub
---@field from_hub fun(obj: luna.Object): luna.Object|nil the hub → this version

---@class luna.ConverterSpec
---@field group string the CRD's API group ("example.com")
---@field kind string the CRD's kind ("Widget")
---@field plural? string the CRD's plural (default the kind lowercased with "s"); the CRD's name is plural.group
---@field hub string the version every other converts through ("v1")
---@field versions table<string, luna.ConverterSpoke> every served version but the hub
---@field timeout_seconds? integer 1..30, default 10: the call's budget is this minus a margin

---What luna.webhook returns (read-only).
---@class luna.Webhook

---What luna.webhooks returns: a file of webhooks only.
---@class luna.WebhookSet

---What luna.controller returns (read-only).
---@class luna.Controller

---A lister over the controller's own informer of a kind (copies; never yields).
---@class luna.Cache
local Cache = {}

---The object or nil: `get(namespace, name)`, or `get(name)` (also `get(nil, name)`, as `req.namespace` is nil) for cluster-scoped kinds.
---@param namespace_or_name string
---@param name? string
---@return luna.Object|nil
function Cache:get(namespace_or_name, name) end

---Objects of the cache, optionally in a namespace and matching labels.
---@param opts? {namespace?: string, labels?: luna.Labels}
---@return luna.Object[]
function Cache:list(opts) end

---Objects whose index `name` (spec.indexes) has `value`.
---@param name string
---@param value string
---@return luna.Object[]
function Cache:by_index(name, value) end

---Structured logging with controller, key and reconcile_id attached.
---@class luna.Log
local Log = {}
---@param msg string
---@param fields? table<string, any>
function Log.debug(msg, fields) end
---@param msg string
---@param fields? table<string, any>
function Log.info(msg, fields) end
---@param msg string
---@param fields? table<string, any>
function Log.warn(msg, fields) end
---@param msg string
---@param fields? table<string, any>
function Log.error(msg, fields) end

local luna = {}

---Validates a controller spec and returns the controller the host runs.
---A controller file returns its value: `return luna.controller { ... }`.
---@param spec luna.ControllerSpec
---@return luna.Controller
function luna.controller(spec) end

---Declares an admission webhook, checked at load with Kubernetes' defaults (docs/webhooks.md).
---@param spec luna.WebhookSpec
---@return luna.Webhook
function luna.webhook(spec) end

---Declares a CRD's version converter (a conversion webhook), checked at load (docs/webhooks.md).
---@param spec luna.ConverterSpec
---@return luna.Webhook
function luna.converter(spec) end

---A file of webhooks only: `return luna.webhooks { luna.webhook { ... } }`.
---@param list luna.Webhook[]
---@return luna.WebhookSet
function luna.webhooks(list) end

---True only for values luna.controller made.
---@param v any
---@return boolean
function luna.is_controller(v) end

---Parses a kind string.
---@param kind string
---@return {group: string, version: string, kind: string, api_version: string}|nil
---@return string|nil err
function luna.parse_kind(kind) end

---The lister of a kind the controller watches, owns or watches.
---@param kind luna.Kind
---@return luna.Cache
function luna.cache(kind) end

---GET (yields; inside reconcile): `get(kind, namespace, name)` or `get(kind, name)`.
---@param kind luna.Kind
---@param namespace_or_name string
---@param name? string
---@return luna.Object|nil
---@return luna.Error|nil
function luna.get(kind, namespace_or_name, name) end

---LIST (yields): the List object (items, metadata.continue).
---@param kind luna.Kind
---@param opts? {namespace?: string, labels?: luna.Labels, fields?: string, limit?: integer, continue?: string}
---@return {items: luna.Object[], metadata: table}|nil
---@return luna.Error|nil
function luna.list(kind, opts) end

---POST (yields): the created object.
---@param obj luna.Object
---@param opts? {dry_run?: boolean, field_manager?: string}
---@return luna.Object|nil
---@return luna.Error|nil
function luna.create(obj, opts) end

---PUT (yields): the updated object (metadata.resourceVersion guards against conflicts).
---@param obj luna.Object
---@param opts? {dry_run?: boolean, field_manager?: string}
---@return luna.Object|nil
---@return luna.Error|nil
function luna.update(obj, opts) end

---PUT …/status (yields).
---@param obj luna.Object
---@param opts? {dry_run?: boolean, field_manager?: string}
---@return luna.Object|nil
---@return luna.Error|nil
function luna.update_status(obj, opts) end

---PATCH (yields); type "merge" (default), "json" or "strategic".
---@param kind luna.Kind
---@param namespace string|nil
---@param name string
---@param patch table|string
---@param opts? {type?: "merge"|"json"|"strategic", subresource?: string}
---@return luna.Object|nil
---@return luna.Error|nil
function luna.patch(kind, namespace, name, patch, opts) end

---Server-side apply (yields).
---@param obj luna.Object
---@param opts {field_manager: string, force?: boolean, subresource?: string}
---@return luna.Object|nil
---@return luna.Error|nil
function luna.apply(obj, opts) end

---DELETE (yields).
---@param kind luna.Kind
---@param namespace string|nil
---@param name string
---@param opts? {propagation?: "Background"|"Foreground"|"Orphan", preconditions?: {uid?: string, resource_version?: string}, grace_period?: number}
---@return table|nil
---@return luna.Error|nil
function luna.delete(kind, namespace, name, opts) end

---Records an Event about obj (yields; repeats within 10 minutes patch its count).
---@param obj luna.Object
---@param type "Normal"|"Warning"
---@param reason string
---@param note string
---@param action? string
---@return true|nil
---@return luna.Error|nil
function luna.event(obj, type, reason, note, action) end

---The warnings (Warning: 299 texts, e.g. 'unknown field "dta"') the server sent with this
---reconcile's last API call; a fresh list, empty when it sent none.
---@return string[]
function luna.last_warnings() end

---Deep equality of JSON-like values.
---@param a any
---@param b any
---@return boolean
function luna.equal(a, b) end

---Queues key (of this controller) at `at`, seconds since the epoch, or
---after { after = seconds }; a key already waiting keeps the earlier time.
---Inside a reconcile only; at most a year ahead; raises on bad input.
---@param key string "namespace/name" or "name"
---@param at number|{after: number}
---@return true
function luna.schedule(key, at) end

---The host's cron schedules (as `every`): times are UTC.
luna.cron = {}

---The first minute of the schedule strictly after `after` (default now),
---or nil when none within five years; raises on a bad schedule.
---@param expr string "*/5 * * * *", "0 3 * * 1-5", "@daily"
---@param after? number seconds since the epoch
---@return number|nil
function luna.cron.next(expr, after) end

---Structured logging (luna.log.info("msg", { k = v })).
luna.log = Log

luna.meta = require("luna.meta")
luna.finalizers = require("luna.finalizers")
luna.conditions = require("luna.conditions")
luna.events = require("luna.events")
luna.time = require("luna.time")
luna.errors = require("luna.errors")
luna.predicates = require("luna.predicates")

luna.is_already_exists = luna.errors.is_already_exists
luna.is_bad_request = luna.errors.is_bad_request
luna.is_conflict = luna.errors.is_conflict
luna.is_error = luna.errors.is_error
luna.is_expired = luna.errors.is_expired
luna.is_forbidden = luna.errors.is_forbidden
luna.is_gone = luna.errors.is_gone
luna.is_internal_error = luna.errors.is_internal_error
luna.is_invalid = luna.errors.is_invalid
luna.is_method_not_supported = luna.errors.is_method_not_supported
luna.is_no_kind_match = luna.errors.is_no_kind_match
luna.is_not_acceptable = luna.errors.is_not_acceptable
luna.is_not_found = luna.errors.is_not_found
luna.is_request_entity_too_large = luna.errors.is_request_entity_too_large
luna.is_server_error = luna.errors.is_server_error
luna.is_server_timeout = luna.errors.is_server_timeout
luna.is_service_unavailable = luna.errors.is_service_unavailable
luna.is_timeout = luna.errors.is_timeout
luna.is_too_many_requests = luna.errors.is_too_many_requests
luna.is_unauthorized = luna.errors.is_unauthorized
luna.is_unsupported_media_type = luna.errors.is_unsupported_media_type

return luna
