---@meta luna.testing
-- luna.testing: the kit `luna test` runs *_test.lua files with
-- (docs/authoring.md).  Spec files also get describe/it/before_each/
-- after_each/pending and assert as globals.
local testing = {}

---A runtime under test: the controllers on the real runtime and an embedded dev server.
---@class luna.TestEnv
---@field url string the dev server's URL ("" under `luna test --kube`)
---@field namespace string where the test's "default" is: "default", or its own namespace under `luna test --kube`
local Env = {}

---@param obj luna.Object
---@return luna.Object
function Env:create(obj) end
---@param obj luna.Object
---@return luna.Object
function Env:update(obj) end
---Server-side apply as field manager "luna-test".
---@param obj luna.Object
---@return luna.Object
function Env:apply(obj) end
---@param kind luna.Kind
---@param namespace string|nil
---@param name string
---@param patch table|string
---@param type? "merge"|"json"|"strategic"
---@return luna.Object
function Env:patch(kind, namespace, name, patch, type) end
---True if it was there.
---@param kind luna.Kind
---@param namespace_or_name string|nil
---@param name? string
---@return boolean
function Env:delete(kind, namespace_or_name, name) end
---Creates (or replaces) each object: a list, one object, or YAML/JSON text (several documents).
---@param objs luna.Object|luna.Object[]|string
---@return luna.Object[]|nil
function Env:seed(objs) end
---env:seed of a manifest file (relative to the spec file).
---@param path string
function Env:seed_file(path) end
---@param kind luna.Kind
---@param namespace_or_name string|nil
---@param name? string
---@return luna.Object|nil
function Env:get(kind, namespace_or_name, name) end
---@param kind luna.Kind
---@param opts? {namespace?: string, labels?: luna.Labels}
---@return luna.Object[]
function Env:list(kind, opts) end
---A raw request to the dev server: status, decoded body.
---@param method string
---@param path string
---@param body? table|string
---@param content_type? string
---@return integer, any
function Env:request(method, path, body, content_type) end
---The API path of a kind (and namespace and name).
---@param kind luna.Kind
---@param namespace? string
---@param name? string
---@return string
function Env:path(kind, namespace, name) end

---@class luna.TestStatus
---@field idle boolean
---@field busy string[] why not idle
---@field clock number the runtime clock
---@field controllers {name: string, started: boolean, queued: integer, processing: integer, waiting: integer, next: number|nil}[]

---Waits until nothing is queued or reconciling and every informer has seen the latest write.
---@param secs? number
---@return luna.TestStatus
function Env:wait_idle(secs) end
---Steps the fake clock, then waits until idle.
---@param secs number
---@return luna.TestStatus
function Env:advance(secs) end
---@return luna.TestStatus
function Env:status() end

---@class luna.TestCall
---@field controller string
---@field key string
---@field method string
---@field path string
---@field content_type? string
---@field body? any decoded when JSON
---@field status integer 0: no answer

---The API calls reconciles made since the last call of this method.
---@param filter? {method?: string, path?: string, controller?: string}
---@return luna.TestCall[]
function Env:calls(filter) end
---Events (events.k8s.io/v1), in namespace or all.
---@param namespace? string
---@return luna.Object[]
function Env:events(namespace) end
---luna's log so far (the last `lines` lines).
---@param lines? integer
---@return string
function Env:log(lines) end
---@return integer exit status
function Env:stop() end

---What the API server warned on the kit's last request (an admission webhook's warnings among them).
---@type string[]
Env.last_warnings = {}

---A webhook request as a test writes it: the fields a webhook function gets (luna.AdmissionRequest),
---each optional but object or old_object; object and old_object may be YAML/JSON file paths.
---The rest is filled in as the API server would (operation from the objects, uid, kind,
---resource, name, namespace, user_info luna-test).
---@class luna.TestAdmission
---@field operation? "CREATE"|"UPDATE"|"DELETE"|"CONNECT"
---@field object? luna.Object|string
---@field old_object? luna.Object|string
---@field user_info? {username: string, uid?: string, groups?: string[], extra?: table}
---@field dry_run? boolean
---@field sub_resource? string
---@field name? string
---@field namespace? string
---@field kind? {group: string, version: string, kind: string}
---@field resource? {group: string, version: string, resource: string}
---@field request_kind? {group: string, version: string, kind: string}
---@field request_resource? {group: string, version: string, resource: string}
---@field request_sub_resource? string
---@field options? table
---@field uid? string

---What env:admit returns.
---@class luna.TestAdmissionResult
---@field allowed boolean
---@field code? integer status.code (403 for a plain denial, 500 for a failure under failurePolicy Fail)
---@field message? string
---@field reason? string
---@field warnings string[]
---@field patch {op: "add"|"remove"|"replace", path: string, value?: any}[] the RFC 6902 operations sent (empty: none)
---@field object? luna.Object the request's object with the patch applied
---@field webhook string
---@field uid string
---@field operation string
---@field review table the AdmissionReview answered

---Calls one webhook directly, as the API server would, through the runtime's own webhook server
---(the same sandbox, guard, failure policy and shadow). Raises on a bad request, an unknown
---webhook (naming the loaded ones) or an answer other than 200.
---@param webhook string its name ("widgets.default.example.com") or path ("/mutate/NAME")
---@param request luna.TestAdmission|table|string a request table, an AdmissionReview, or a YAML/JSON file of either (or of an object: CREATE)
---@return luna.TestAdmissionResult
function Env:admit(webhook, request) end

---What env:convert returns.
---@class luna.TestConversionResult
---@field ok boolean result.status == "Success"
---@field message? string result.message (a Failure's reason)
---@field objects luna.Object[] the converted objects
---@field uid string
---@field review table the ConversionReview answered

---Calls one converter directly, as the API server would (ConversionReview v1). A Failure is an
---answer (ok false); raises on an unknown converter (naming the loaded ones) or an answer other than 200.
---@param crd string the CRD's name ("widgets.example.com") or the converter's path ("/convert/NAME")
---@param objects luna.Object[]|luna.Object
---@param api_version string the group/version wanted ("example.com/v1")
---@return luna.TestConversionResult
function Env:convert(crd, objects, api_version) end

---Registers the directory's webhooks with the API server (what start{webhooks = true} does) and
---returns once the server calls them.
function Env:register_webhooks() end

---The runtime's webhook server.
---@return {address: string, cert: string}
function Env:webhook_server() end

---@param opts? {controllers?: string[], dir?: string, seed?: string[], objects?: luna.Object[], fake_clock?: boolean, args?: string[], timeout?: number, start_timeout?: number, log_level?: string, webhooks?: boolean}
---@return luna.TestEnv
function testing.start(opts) end

---True under `luna test --kube` (a real control plane; docs/testing.md).
---@type boolean
testing.kube = false

---Under `luna test --kube`, ends the running test as skipped with the reason; nothing on the dev server.
---@param reason string
function testing.dev_only(reason) end

---Every field of want is in have (the first difference as second value).
---@param have any
---@param want any
---@return boolean, string|nil
function testing.contains(have, want) end

---@param a any
---@param b any
---@return boolean
function testing.same(a, b) end

---The differences between two JSON-like values, one line each ("  .spec.replicas: want 3, have 5").
---@param want any
---@param have any
---@param max? integer lines at most (20)
---@return string
function testing.differences(want, have, max) end

---RFC 6902 operations applied to a copy of doc (add, remove, replace).
---@param doc table
---@param ops table[]
---@return table
function testing.apply_patch(doc, ops) end

---The spec files' `assert` (busted's names: equal, same, contains, is_nil, truthy, matches,
---has_error, ...), and for webhooks: allowed(res), denied(res [, text]) (the message contains
---text, plain) and patched(ops, res) on what env:admit returned, each failing with what differs.
---@class luna.TestAssert
---@field allowed fun(res: luna.TestAdmissionResult, msg?: string)
---@field denied fun(res: luna.TestAdmissionResult, text?: string, msg?: string)
---@field patched fun(ops: table[], res: luna.TestAdmissionResult, msg?: string)
---@field same fun(want: any, have: any, msg?: string)
---@field contains fun(want: any, have: any, msg?: string)
---@type luna.TestAssert
testing.assert = {}

---@param name string
---@param fn fun()
function describe(name, fn) end
---@param name string
---@param fn fun()
function it(name, fn) end
---@param fn fun()
function before_each(fn) end
---@param fn fun()
function after_each(fn) end
---@param name string
function pending(name) end

return testing
