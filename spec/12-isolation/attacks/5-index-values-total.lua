-- attack: an index holding the most values the per-object bound allows (1,024 of 4 KiB) for every object, and 40 objects to index
-- expect: runs
-- reached: index fodder indexed
-- alone: it creates 40 objects every controller in its namespace would reconcile
local luna = require "luna"
local pad = ("v"):rep(4000)
local FODDER = 40
return luna.controller {
  name = "5-index-values-total", watch = { "v1/ConfigMap", namespace = "@NS@" },
  indexes = {
    fat = function(obj)
      local out = {}
      for i = 1, 1024 do out[i] = obj.metadata.name .. ":" .. i .. pad end
      return out
    end,
  },
  reconcile = function(req)
    if req.name ~= "target-a" then return end
    local cache = luna.cache("v1/ConfigMap")
    for i = 1, FODDER do
      local name = "fodder-" .. i
      if not cache:get(req.namespace, name) then
        local _, err = luna.create({ apiVersion = "v1", kind = "ConfigMap",
                                     metadata = { namespace = req.namespace, name = name } })
        if err and not luna.is_already_exists(err) then return nil, err end
      end
    end
    -- the index takes (or refuses) an object's values as the informer
    -- stores it: once the cache holds them all, the index has seen them
    if #cache:list({ namespace = req.namespace }) < FODDER + 2 then
      return { requeue_after = 0.2 }
    end
    luna.log.info("index fodder indexed")
  end,
}
