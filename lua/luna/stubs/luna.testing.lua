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

---@param opts? {controllers?: string[], dir?: string, seed?: string[], objects?: luna.Object[], fake_clock?: boolean, args?: string[], timeout?: number, start_timeout?: number, log_level?: string}
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
