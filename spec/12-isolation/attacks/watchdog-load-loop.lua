-- attack: never finish loading (an endless loop at the top of the file)
-- expect: refused
-- error: controller file exceeded its
while true do end
