-- attack: plant a global for other controller files to pick up
-- expect: refused
-- error: assignment to global 'reconcile'
reconcile = function() end
