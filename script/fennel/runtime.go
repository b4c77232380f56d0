package fennel

// RuntimeLua returns the Lua source of a chunk that returns the `fennel`
// table that cartridges reach at run time: view (Fennel's pretty printer,
// with its options and output format) and version. The Lua runtime loads it
// once per state and exposes it as the global `fennel`.
func RuntimeLua() string { return runtimeLua }

// LanguageVersion is the version of the Fennel language this compiler
// follows; the runtime table reports it as fennel.version.
const LanguageVersion = "1.5.3"

const runtimeLua = `local type, tostring, pairs, ipairs, next = type, tostring, pairs, ipairs, next
local getmetatable, setmetatable, error = getmetatable, setmetatable, error
local string, table, math = string, table, math

local order = {number = 1, boolean = 2, string = 3, table = 4, ["function"] = 5, userdata = 6, thread = 7}
local defaults = {["detect-cycles?"] = true, ["empty-as-sequence?"] = false, ["escape-newlines?"] = false,
  ["line-length"] = 80, ["max-sparse-gap"] = 1, ["metamethod?"] = true, ["one-line?"] = false,
  ["prefer-colon?"] = false, ["utf8?"] = true, depth = 128}

local function opt(o, k)
  local v = o[k]
  if type(v) == "table" and v.once ~= nil then return v.once end
  return v
end

local function mpairs(t)
  local mt = getmetatable(t)
  if type(mt) == "table" and mt.__pairs ~= nil then return mt.__pairs(t) end
  return pairs(t)
end

local function len(t)
  local mt = getmetatable(t)
  if type(mt) == "table" and mt.__len ~= nil then return mt.__len(t) end
  return #t
end

local function before(a, b)
  local x, y = a[1], b[1]
  local tx, ty = type(x), type(y)
  if tx == ty and (tx == "string" or tx == "number") then return x < y end
  local ox, oy = order[tx], order[ty]
  if ox and oy then return ox < oy end
  if ox then return true end
  if oy then return false end
  return tx < ty
end

local function entries(t, o)
  local gap = o["max-sparse-gap"]
  if type(gap) ~= "number" or gap ~= math.floor(gap) then
    error(("max-sparse-gap must be an integer: got '%s'"):format(tostring(gap)))
  end
  local assoc, kv = false, {}
  for k, v in mpairs(t) do
    if type(k) ~= "number" or k < 1 or k ~= math.floor(k) then assoc = true end
    kv[#kv + 1] = {k, v}
  end
  table.sort(kv, before)
  if not assoc then
    local widest, last = 0, 0
    for _, e in ipairs(kv) do
      if e[1] - last > widest then widest = e[1] - last end
      last = e[1]
    end
    if widest > gap then
      assoc = true
    else
      local filled, i = {}, 0
      for _, e in ipairs(kv) do
        i = i + 1
        while i < e[1] do filled[#filled + 1] = {i}; i = i + 1 end
        filled[#filled + 1] = e
      end
      kv = filled
    end
  end
  if #kv == 0 then return kv, "empty" end
  return kv, assoc and "table" or "seq"
end

local function appearances(t, seen)
  if type(t) == "table" then
    if not seen[t] then
      seen[t] = 1
      for k, v in pairs(t) do appearances(k, seen); appearances(v, seen) end
    else
      seen[t] = seen[t] + 1
    end
  end
  return seen
end

local function cycles(t, seen)
  if type(t) == "table" then
    seen[t] = true
    for k, v in pairs(t) do
      local found = seen[k] or cycles(k, seen) or seen[v] or cycles(v, seen)
      if found then return found end
    end
  end
end

local function remember(t, seen)
  if not seen[t] then
    seen.len = seen.len + 1
    seen[t] = seen.len
  end
  return seen
end

local function visible_cycle(t, o)
  return opt(o, "detect-cycles?") and cycles(t, {}) and remember(t, o.seen) and (o.appearances[t] or 0) > 1
end

local function utf8_len(s)
  local n = 0
  for _ in s:gmatch("[%z\1-\127\192-\247]") do n = n + 1 end
  return n
end

local function is_comment(x)
  return type(x) == "table" and type(x[1]) == "string" and x[1]:find("^;") ~= nil
end

local pp

local function lines_of(items, o, multi, indent, kind, prefix, last_comment)
  local open = prefix .. (kind == "seq" and "[" or "{")
  local close = kind == "seq" and "]" or "}"
  local one = open .. table.concat(items, " ") .. close
  if not opt(o, "one-line?") and (multi or o["line-length"] < indent + #one or last_comment) then
    local sep = "\n" .. string.rep(" ", indent)
    return open .. table.concat(items, sep) .. (last_comment and sep or "") .. close
  end
  return one
end

local function opener(t, o, indent)
  local cyc = visible_cycle(t, o)
  local id = cyc and o.seen[t]
  local width = id and (#tostring(id) + 2) or 1
  return indent + width, cyc and ("@" .. id) or ""
end

local function pp_assoc(t, kv, o, indent)
  local id = o.seen[t]
  if o.depth <= o.level then return "{...}" end
  if id and opt(o, "detect-cycles?") then return "@" .. id .. "{...}" end
  local ind, prefix = opener(t, o, indent)
  local slen = opt(o, "utf8?") and utf8_len or function(s) return #s end
  local multi, items = false, {}
  for _, e in ipairs(kv) do
    local k = pp(e[1], o, ind + 1, true)
    local v = pp(e[2], o, ind + slen(k) + 1)
    multi = multi or k:find("\n") or v:find("\n")
    items[#items + 1] = k .. " " .. v
  end
  return lines_of(items, o, multi, ind, "table", prefix, false)
end

local function pp_seq(t, kv, o, indent)
  local id = o.seen[t]
  if o.depth <= o.level then return "[...]" end
  if id and opt(o, "detect-cycles?") then return "@" .. id .. "[...]" end
  local ind, prefix = opener(t, o, indent)
  local last_comment = is_comment(t[#t])
  local multi, items = false, {}
  for _, e in ipairs(kv) do
    local v = pp(e[2], o, ind)
    multi = multi or v:find("\n") or v:find("^;")
    items[#items + 1] = v
  end
  return lines_of(items, o, multi, ind, "seq", prefix, last_comment)
end

local function join_lines(lines, o, indent, force)
  if len(lines) == 0 then return opt(o, "empty-as-sequence?") and "[]" or "{}" end
  local trimmed = {}
  for i, l in ipairs(lines) do trimmed[i] = (l:gsub("^%s+", "")) end
  local one = table.concat(trimmed, " ")
  if not opt(o, "one-line?") and (force or one:find("\n") or o["line-length"] < indent + len(one)) then
    return table.concat(lines, "\n" .. string.rep(" ", indent))
  end
  return one
end

local function pp_meta(t, method, o, indent)
  if o.depth <= o.level then return opt(o, "empty-as-sequence?") and "[...]" or "{...}" end
  o["visible-cycle?"] = function(x) return visible_cycle(x, o) end
  local lines, force = method(t, pp, o, indent)
  o["visible-cycle?"] = nil
  if type(lines) == "string" then return lines end
  if type(lines) == "table" then return join_lines(lines, o, indent, force) end
  error("__fennelview metamethod must return a table of lines")
end

local function pp_table(t, o, indent)
  o.level = o.level + 1
  local out
  local mt = opt(o, "metamethod?") and getmetatable(t)
  local method = type(mt) == "table" and mt.__fennelview or nil
  if method ~= nil then
    out = pp_meta(t, method, o, indent)
  else
    local kv, kind = entries(t, o)
    if kind == "empty" then
      out = opt(o, "empty-as-sequence?") and "[]" or "{}"
    elseif kind == "table" then
      out = pp_assoc(t, kv, o, indent)
    else
      out = pp_seq(t, kv, o, indent)
    end
  end
  o.level = o.level - 1
  return out
end

local function exponent(n, fallback)
  for i = 0, 99 do
    local s = string.format("%." .. i .. "e", n)
    if n == tonumber(s) then
      local e = s:match("e%+?(%d+)$")
      if e and tonumber(e) > 14 then return s end
      return fallback
    end
  end
end

local inf, ninf = tostring(1 / 0), tostring(-1 / 0)

local function number(n, o)
  local s
  if n ~= n then
    if string.byte(tostring(n)) == 45 then s = o["negative-nan"] or "-.nan" else s = o.nan or ".nan" end
  elseif math.floor(n) == n then
    local whole = string.format("%.0f", n)
    if whole == inf then s = o.infinity or ".inf"
    elseif whole == ninf then s = o["negative-infinity"] or "-.inf"
    elseif whole == tostring(n) then s = whole
    else s = exponent(n, whole) or whole end
  else
    -- Lua 5.4's tostring; golua's gives more digits
    s = string.format("%.14g", n)
  end
  return (string.gsub(s, ",", "."))
end

local utf8_ranges = {{0, 127, 0, 127, 1}, {192, 223, 128, 2047, 2}, {224, 239, 2048, 65535, 3}, {240, 247, 65536, 1114111, 4}}

local function utf8_width(s, i)
  local b = string.byte(s, i)
  if not b then return nil end
  for _, r in ipairs(utf8_ranges) do
    if r[1] <= b and b <= r[2] then
      local code = b - r[1]
      for j = i + 1, i + r[5] - 1 do
        local c = string.byte(s, j)
        if not (c and 128 <= c and c <= 191) then return nil end
        code = code * 64 + (c - 128)
      end
      if r[3] <= code and code <= r[4] and not (55296 <= code and code <= 57343) then return r[5] end
      return nil
    end
  end
end

local function byte_escape(b) return ("\\%03d"):format(b) end

local function escape_utf8(s, o)
  local esc = opt(o, "byte-escape") or byte_escape
  local out, i = {}, 1
  while i <= #s do
    local j = string.find(s, "[\128-\255]", i) or (#s + 1)
    local w = utf8_width(s, j)
    out[#out + 1] = string.sub(s, i, j + (w or 0) - 1)
    if not w and j <= #s then out[#out + 1] = esc(s:byte(j), o) end
    i = j + (w or 1)
  end
  return table.concat(out)
end

local function pp_string(s, o, indent)
  local n = len(s)
  local esc_nl = n < 2 or (opt(o, "escape-newlines?") and n < o["line-length"] - indent)
  local esc = opt(o, "byte-escape") or byte_escape
  local map = setmetatable({["\""] = "\\\"", ["\\"] = "\\\\", ["\a"] = "\\a", ["\b"] = "\\b", ["\t"] = "\\t",
    ["\v"] = "\\v", ["\f"] = "\\f", ["\r"] = "\\r", ["\n"] = esc_nl and "\\n" or "\n"},
    {__index = function(_, c) return esc(c:byte(), o) end})
  local out = "\"" .. s:gsub("[%c\\\"]", map) .. "\""
  if opt(o, "utf8?") then return escape_utf8(out, o) end
  return out
end

local function options_for(x, given)
  local o = {}
  for k, v in pairs(defaults) do o[k] = v end
  for k, v in pairs(given or {}) do o[k] = v end
  o.appearances, o.level, o.seen = appearances(x, {}), 0, {len = 0}
  return o
end

pp = function(x, o, indent, colon)
  indent = indent or 0
  o = o or options_for(x)
  if o.preprocess then x = o.preprocess(x, o) end
  local tx = type(x)
  local mt = getmetatable(x)
  if tx == "table" or (tx == "userdata" and type(mt) == "table" and mt.__fennelview) then
    return pp_table(x, o, indent)
  elseif tx == "number" then
    return number(x, o)
  elseif tx == "string" then
    local want = colon
    if want == nil then
      if type(o["prefer-colon?"]) == "function" then want = o["prefer-colon?"](x) else want = opt(o, "prefer-colon?") end
    end
    if want and x:find("^[-%w?^_!$%&*+./|<=>]+$") then return ":" .. x end
    return pp_string(x, o, indent)
  elseif tx == "boolean" or tx == "nil" then
    return tostring(x)
  end
  return "#<" .. tostring(x) .. ">"
end

local function view(x, options)
  return pp(x, options_for(x, options), 0)
end

return {view = view, version = "` + LanguageVersion + `"}
`
