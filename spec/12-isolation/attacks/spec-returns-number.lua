-- attack: the file returns something that is not a controller
-- expect: refused
-- error: must return luna.controller
return 42
