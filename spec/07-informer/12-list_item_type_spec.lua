-- kube-apiserver leaves apiVersion and kind out of the items of a LIST of a
-- built-in kind (kubernetes#3030), while watch events and GETs carry them.
-- A cached object must have them however it arrived: listed (a LIST sync,
-- a relist) or watched, or a script reading obj.kind would see nil until
-- the object's first change.  Runs against the cluster in KUBECONFIG too.
local core = require("luna.core")
local S = require("07-informer.support")

describe("cached objects from a LIST", function()
  local srv, env
  S.server_each_test(nil, function(s, e) srv, env = s, e end)

  for _, o in ipairs({ { watch_list = "off" }, { watch_list = "off", page_size = 2 },
                       { watch_list = "on" }, { watch_list = "off", metadata_only = true } }) do
    local how = ("watch_list=%s%s%s"):format(o.watch_list, o.page_size and ", paged" or "",
      o.metadata_only and ", metadata only" or "")
    it("have apiVersion and kind, listed and watched (" .. how .. ")", function()
      for i = 1, 5 do srv:create_cm("listed-" .. i) end
      local inf = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, watch_list = o.watch_list,
        page_size = o.page_size, metadata_only = o.metadata_only }
      assert(core.loop.run_until(function() return inf:has_synced() end, 20), "sync")
      srv:create_cm("watched")
      S.converge(inf, S.server_state(srv), 20)
      local seen = 0
      for _, name in ipairs({ "listed-1", "listed-2", "listed-3", "listed-4", "listed-5", "watched" }) do
        local obj = assert(inf:get(srv.ns .. "/" .. name), name)
        local t = core.json.decode(obj:json())
        assert.equal("v1", t.apiVersion, name)
        assert.equal("ConfigMap", t.kind, name)
        assert.equal(name, t.metadata.name)
        seen = seen + 1
      end
      assert.equal(6, seen)
      inf:release()
    end)
  end
end)
