-- attack: require a file outside the controllers directory by path traversal
-- expect: refused
-- error: invalid module name '../../../etc/passwd'
return require("../../../etc/passwd")
