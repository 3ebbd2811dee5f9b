-- The complete controllers docs/team-controllers.md shows: every block it
-- marks `<!-- example: DIR/FILE -->`, as files.  The specs that run them
-- (spec/19-authoring/12-team_controllers_spec.lua on the dev server,
-- spec/16-deploy/08-team_controllers_kube_spec.lua on a real control
-- plane) read them from the page, so the page cannot drift from what runs.
local helpers = require("helpers")

local M = {}

M.DOC = "docs/team-controllers.md"

-- The files every example needs, by directory.
M.FILES = {
  onboarding = { "onboard.lua", "onboard_test.lua", "onboard-bind-edit.yaml" },
  backup = { "crd-backups.yaml", "backup.lua", "backup_test.lua" },
}

-- { ["DIR/FILE"] = text } of every marked block; a path shown twice is an error.
function M.files()
  local text = assert(helpers.read_file(M.DOC))
  local files = {}
  for path, body in text:gmatch("<!%-%- example: ([%w_.%-]+/[%w_.%-]+) %-%->\n```%w*\n(.-)```\n") do
    assert(not files[path], path .. " is shown twice in " .. M.DOC)
    files[path] = body
  end
  return files
end

-- A temporary directory holding every example's files under DIR/.
function M.extract()
  local dir = helpers.tmpdir()
  for path, body in pairs(M.files()) do
    local sub = path:match("^([^/]+)/")
    helpers.run("mkdir -p '" .. dir .. "/" .. sub .. "'")
    helpers.write_file(dir .. "/" .. path, body)
  end
  return dir
end

-- luna's path, absolute (the specs cd elsewhere).
function M.luna()
  local luna = helpers.luna
  if luna:sub(1, 1) ~= "/" then luna = helpers.run("pwd"):gsub("\n$", "") .. "/" .. luna end
  return luna
end

return M
