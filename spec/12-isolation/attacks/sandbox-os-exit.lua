-- attack: exit the host process from the controller file
-- expect: refused
-- error: os.exit is not available to luna scripts
os.exit(0)
