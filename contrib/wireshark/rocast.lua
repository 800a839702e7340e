-- Wireshark/tshark dissector for rocast's own protocols (Lua, Wireshark >= 3.6):
--   * MRP, Cepheus' MFT Registration Protocol (UDP 4792): registrations (SEND and WRITE
--     member records), release, prune, address allocation request and answer, and
--     rocast's authentication trailer ("RMA1", counter, HMAC tag);
--   * the PEEL shim header (UDP 4793, between UDP and the BTH): version, flags, prefix,
--     pod, plane; the RoCEv2 packet after it is handed to Wireshark's own dissector;
--   * the group control channel between a leader and its members (TCP 4793): every
--     framed message (Params, Join, Confirm, Done, Result, Overlay, Ready, Announce,
--     Close, Evicted, Invitation, Resume, Holding) with its fields;
--   * the RoCEv2 CNP (BTH opcode 0x81), which Wireshark shows as "Unknown OpCode".
-- Byte layouts: crates/core/src/wire/{mrp.rs, mrp_auth.rs, peel.rs, group_control.rs}.
-- Use: tshark -X lua_script:contrib/wireshark/rocast.lua -r capture.pcap
--      (or copy this file into Wireshark's personal plugins folder).
-- Tested by tests/python/test_wireshark.py on `rocast pcap sample --all-protocols` and on
-- a lab capture.

local MRP_PORT, PEEL_PORT, CONTROL_PORT, ROCE_PORT = 4792, 4793, 4793, 4791

---------------------------------------------------------------------------------------
-- MRP
local mrp = Proto("rocast_mrp", "rocast MRP (Cepheus MFT Registration Protocol)")
local F = mrp.fields
F.kind = ProtoField.string("rocast_mrp.kind", "Kind")
F.mcst_id = ProtoField.ipv4("rocast_mrp.mcst_id", "McstID")
F.seq = ProtoField.uint8("rocast_mrp.seq", "Packet")
F.total = ProtoField.uint8("rocast_mrp.total", "Packets")
F.count = ProtoField.uint8("rocast_mrp.count", "Records")
F.flags = ProtoField.uint8("rocast_mrp.flags", "Flags", base.HEX)
F.f_write = ProtoField.bool("rocast_mrp.flags.write", "WRITE group", 8, nil, 0x01)
F.f_release = ProtoField.bool("rocast_mrp.flags.release", "Release", 8, nil, 0x02)
F.f_prune = ProtoField.bool("rocast_mrp.flags.prune", "Prune", 8, nil, 0x04)
F.f_allocate = ProtoField.bool("rocast_mrp.flags.allocate", "Allocate", 8, nil, 0x08)
F.f_new = ProtoField.bool("rocast_mrp.flags.new_incarnation", "New incarnation (not a refresh)", 8, nil, 0x10)
F.member_ip = ProtoField.ipv4("rocast_mrp.member.ip", "Member")
F.member_qpn = ProtoField.uint24("rocast_mrp.member.qpn", "QPN", base.HEX)
F.member_va = ProtoField.uint64("rocast_mrp.member.va", "VA", base.HEX)
F.member_rkey = ProtoField.uint32("rocast_mrp.member.rkey", "RKey", base.HEX)
F.pruned_ip = ProtoField.ipv4("rocast_mrp.pruned", "Pruned member")
F.nonce = ProtoField.uint64("rocast_mrp.nonce", "Nonce", base.HEX)
F.lease_ms = ProtoField.uint32("rocast_mrp.lease_ms", "Lease (ms)")
F.auth_counter = ProtoField.uint64("rocast_mrp.auth.counter", "Auth counter")
F.auth_tag = ProtoField.bytes("rocast_mrp.auth.tag", "Auth tag (HMAC-SHA256/128)")

local AUTH_LEN = 4 + 8 + 16

function mrp.dissector(tvb, pinfo, tree)
  local len = tvb:len()
  if len < 8 then return 0 end
  pinfo.cols.protocol = "rocast MRP"
  local t = tree:add(mrp, tvb(), "rocast MRP")
  local body = len
  -- The authentication trailer, when the datagram ends with one.
  if len >= AUTH_LEN + 8 and tvb(len - AUTH_LEN, 4):string() == "RMA1" then
    body = len - AUTH_LEN
    local a = t:add(tvb(body, AUTH_LEN), "Authentication trailer (RMA1)")
    a:add(F.auth_counter, tvb(body + 4, 8))
    a:add(F.auth_tag, tvb(body + 12, 16))
  end
  if body == 20 and tvb(0, 4):string() == "RCAL" then
    t:add(F.kind, "allocation")
    t:add(F.mcst_id, tvb(4, 4))
    t:add(F.nonce, tvb(8, 8))
    t:add(F.lease_ms, tvb(16, 4))
    pinfo.cols.info = "MRP allocation " .. tostring(tvb(4, 4):ipv4())
    return len
  end
  local flags = tvb(7, 1):uint()
  local count = tvb(6, 1):uint()
  local kind
  if flags == 8 then kind = "allocate"
  elseif flags == 2 then kind = "release"
  elseif flags == 4 then kind = "prune"
  -- bit 0 WRITE and bit 4 NEW incarnation; nothing else.
  elseif bit.band(flags, 0xee) == 0 then kind = "registration"
  else kind = "unknown" end
  t:add(F.kind, kind)
  t:add(F.mcst_id, tvb(0, 4))
  t:add(F.seq, tvb(4, 1))
  t:add(F.total, tvb(5, 1))
  t:add(F.count, tvb(6, 1))
  local ft = t:add(F.flags, tvb(7, 1))
  ft:add(F.f_write, tvb(7, 1))
  ft:add(F.f_release, tvb(7, 1))
  ft:add(F.f_prune, tvb(7, 1))
  ft:add(F.f_allocate, tvb(7, 1))
  ft:add(F.f_new, tvb(7, 1))
  local info = "MRP " .. kind .. " " .. tostring(tvb(0, 4):ipv4())
  if kind == "registration" then
    local rec = (bit.band(flags, 1) == 1) and 20 or 8
    if body ~= 8 + count * rec then
      t:add_expert_info(PI_MALFORMED, PI_ERROR, "length is not 8 + count x record")
    end
    for i = 0, count - 1 do
      local o = 8 + i * rec
      if o + rec > body then break end
      local m = t:add(tvb(o, rec), "Member " .. tostring(tvb(o, 4):ipv4()))
      m:add(F.member_ip, tvb(o, 4))
      m:add(F.member_qpn, tvb(o + 5, 3))
      if rec == 20 then
        m:add(F.member_va, tvb(o + 8, 8))
        m:add(F.member_rkey, tvb(o + 16, 4))
      end
    end
    info = info .. string.format(" (%d/%d, %d members)", tvb(4, 1):uint() + 1, tvb(5, 1):uint(), count)
    if bit.band(flags, 0x10) ~= 0 then info = info .. ", new incarnation" end
  elseif kind == "prune" then
    for i = 0, count - 1 do
      local o = 8 + i * 4
      if o + 4 > body then break end
      t:add(F.pruned_ip, tvb(o, 4))
    end
  elseif kind == "allocate" and body >= 20 then
    t:add(F.nonce, tvb(8, 8))
    t:add(F.lease_ms, tvb(16, 4))
    info = "MRP allocate request"
  end
  pinfo.cols.info = info
  return len
end
DissectorTable.get("udp.port"):add(MRP_PORT, mrp)

---------------------------------------------------------------------------------------
-- PEEL shim (UDP 4793) and group control (TCP 4793)
local peel = Proto("rocast_peel", "rocast PEEL shim")
local P = peel.fields
P.version = ProtoField.uint8("rocast_peel.version", "Version", base.DEC, nil, 0xf0)
P.flags = ProtoField.uint8("rocast_peel.flags", "Flags", base.HEX, nil, 0x0f)
P.core = ProtoField.bool("rocast_peel.flags.core_replicate", "Core replicates", 8, nil, 0x01)
P.over = ProtoField.bool("rocast_peel.flags.over_covered", "Over-covered", 8, nil, 0x02)
P.src = ProtoField.bool("rocast_peel.flags.source_rack", "Source rack delivers", 8, nil, 0x04)
P.prefix_len = ProtoField.uint8("rocast_peel.prefix_len", "Prefix length")
P.pod = ProtoField.uint16("rocast_peel.pod", "Pod")
P.prefix_value = ProtoField.uint16("rocast_peel.prefix_value", "Prefix value")
P.plane = ProtoField.uint16("rocast_peel.plane", "Plane")

function peel.dissector(tvb, pinfo, tree)
  if tvb:len() < 8 then return 0 end
  local t = tree:add(peel, tvb(0, 8), "rocast PEEL shim")
  local ft = t:add(P.flags, tvb(0, 1))
  t:add(P.version, tvb(0, 1))
  ft:add(P.core, tvb(0, 1))
  ft:add(P.over, tvb(0, 1))
  ft:add(P.src, tvb(0, 1))
  t:add(P.prefix_len, tvb(1, 1))
  t:add(P.pod, tvb(2, 2))
  t:add(P.prefix_value, tvb(4, 2))
  t:add(P.plane, tvb(6, 2))
  -- The RoCEv2 packet after the shim, to Wireshark's own dissector.
  local roce = DissectorTable.get("udp.port"):get_dissector(ROCE_PORT)
  if roce and tvb:len() > 8 then roce:call(tvb(8):tvb(), pinfo, tree) end
  pinfo.cols.protocol = "rocast PEEL"
  return tvb:len()
end
DissectorTable.get("udp.port"):add(PEEL_PORT, peel)

local gc = Proto("rocast_control", "rocast group control")
local G = gc.fields
local TYPES = {
  [1] = "Params", [2] = "Join", [3] = "Confirm", [4] = "Done", [5] = "Result",
  [6] = "Overlay", [7] = "Ready", [9] = "Announce", [10] = "Close", [11] = "Evicted",
  [12] = "Invitation", [13] = "Resume", [14] = "Holding",
}
local SCHEMES = { [0] = "sequential", [1] = "binomial tree", [2] = "chain",
  [3] = "binomial pipeline", [4] = "ring", [5] = "binary tree" }
G.type = ProtoField.uint8("rocast_control.type", "Type", base.DEC, TYPES)
G.length = ProtoField.uint16("rocast_control.length", "Length")
G.version = ProtoField.uint8("rocast_control.version", "Version")
G.op = ProtoField.uint8("rocast_control.op", "Op", base.DEC, { [0] = "SEND", [1] = "WRITE" })
G.capacity = ProtoField.uint64("rocast_control.capacity", "Capacity")
G.message_bytes = ProtoField.uint32("rocast_control.message_bytes", "Message bytes")
G.ip = ProtoField.ipv4("rocast_control.ip", "Member")
G.qpn = ProtoField.uint24("rocast_control.qpn", "QPN", base.HEX)
G.va = ProtoField.uint64("rocast_control.va", "VA", base.HEX)
G.rkey = ProtoField.uint32("rocast_control.rkey", "RKey", base.HEX)
G.mcst_id = ProtoField.ipv4("rocast_control.mcst_id", "McstID")
G.seq = ProtoField.uint32("rocast_control.seq", "Buffer")
G.ok = ProtoField.uint8("rocast_control.ok", "OK")
G.sha256 = ProtoField.bytes("rocast_control.sha256", "SHA-256")
G.start_psn = ProtoField.uint24("rocast_control.start_psn", "Start PSN", base.HEX)
G.held_ns = ProtoField.uint64("rocast_control.held_ns", "Held at (CLOCK_MONOTONIC ns)")
G.scheme = ProtoField.uint8("rocast_control.scheme", "Scheme", base.DEC, SCHEMES)
G.block = ProtoField.uint32("rocast_control.block", "Block bytes")
G.pacing = ProtoField.uint32("rocast_control.pacing_mbps", "Pacing (Mbit/s)")
G.window = ProtoField.uint8("rocast_control.window", "Window")
G.rank_ip = ProtoField.ipv4("rocast_control.roster", "Rank")
G.bytes = ProtoField.uint64("rocast_control.bytes", "Bytes")
G.offset = ProtoField.uint64("rocast_control.offset", "Offset")
G.token = ProtoField.bytes("rocast_control.token", "Invitation token")

local function gc_pdu_len(tvb, pinfo, offset)
  return 3 + tvb(offset + 1, 2):uint()
end

local function gc_pdu(tvb, pinfo, tree)
  local ty, n = tvb(0, 1):uint(), tvb(1, 2):uint()
  local name = TYPES[ty] or ("type " .. ty)
  local t = tree:add(gc, tvb(0, 3 + n), "rocast group control: " .. name)
  t:add(G.type, tvb(0, 1))
  t:add(G.length, tvb(1, 2))
  local b = tvb(3, n):tvb()
  local function has(k) return n >= k end
  if ty == 1 and has(18) then
    t:add(G.version, b(0, 1)); t:add(G.op, b(1, 1)); t:add(G.capacity, b(2, 8)); t:add(G.message_bytes, b(10, 4))
    t:add(G.start_psn, b(15, 3))
  elseif ty == 2 and has(21) then
    t:add(G.version, b(0, 1)); t:add(G.ip, b(1, 4)); t:add(G.qpn, b(6, 3)); t:add(G.va, b(9, 8)); t:add(G.rkey, b(17, 4))
  elseif ty == 3 and has(12) then
    t:add(G.mcst_id, b(0, 4)); t:add(G.ip, b(4, 4)); t:add(G.qpn, b(9, 3))
  elseif ty == 4 and has(4) then
    t:add(G.seq, b(0, 4))
  elseif ty == 5 and has(41) then
    t:add(G.ok, b(0, 1)); t:add(G.sha256, b(1, 32)); t:add(G.held_ns, b(33, 8))
  elseif ty == 6 and has(10) then
    t:add(G.scheme, b(0, 1)); t:add(G.block, b(1, 4)); t:add(G.pacing, b(5, 4)); t:add(G.window, b(9, 1))
    for o = 10, n - 4, 4 do t:add(G.rank_ip, b(o, 4)) end
  elseif ty == 9 and has(44) then
    t:add(G.seq, b(0, 4)); t:add(G.bytes, b(4, 8)); t:add(G.sha256, b(12, 32))
  elseif ty == 10 and has(1) then
    t:add(G.ok, b(0, 1))
  elseif ty == 11 and has(4) then
    t:add(G.ip, b(0, 4))
  elseif ty == 12 and has(16) then
    t:add(G.token, b(0, 16))
  elseif ty == 13 and has(12) then
    t:add(G.seq, b(0, 4)); t:add(G.offset, b(4, 8))
  elseif ty == 14 and has(12) then
    t:add(G.seq, b(0, 4)); t:add(G.bytes, b(4, 8))
  end
  pinfo.cols.protocol = "rocast control"
  local info = tostring(pinfo.cols.info)
  if info:find("rocast:") then
    pinfo.cols.info:append(", " .. name)
  else
    pinfo.cols.info = "rocast: " .. name
  end
  return 3 + n
end

function gc.dissector(tvb, pinfo, tree)
  dissect_tcp_pdus(tvb, tree, 3, gc_pdu_len, gc_pdu)
  return tvb:len()
end
DissectorTable.get("tcp.port"):add(CONTROL_PORT, gc)

---------------------------------------------------------------------------------------
-- CNP (BTH opcode 0x81): a post-dissector names it where Wireshark cannot.
local cnp = Proto("rocast_cnp", "RoCEv2 CNP (congestion notification)")
local C = cnp.fields
C.dest_qp = ProtoField.uint24("rocast_cnp.dest_qp", "Destination QP (the flow to slow)", base.HEX)
C.becn = ProtoField.bool("rocast_cnp.becn", "BECN", 8, nil, 0x40)
local udp_dst = Field.new("udp.dstport")
local udp_src = Field.new("udp.srcport")

function cnp.dissector(tvb, pinfo, tree)
  local d, sp = udp_dst(), udp_src()
  if not d or not sp or d.value ~= ROCE_PORT then return end
  -- The BTH starts right after the UDP header.
  local start = sp.offset + 8
  if start + 12 > tvb:len() then return end
  if tvb(start, 1):uint() ~= 0x81 then return end
  local t = tree:add(cnp, tvb(start, 12), "RoCEv2 CNP (BTH opcode 0x81)")
  t:add(C.dest_qp, tvb(start + 5, 3))
  t:add(C.becn, tvb(start + 4, 1))
  pinfo.cols.info = "RoCEv2 CNP QP=" .. string.format("0x%06x", tvb(start + 5, 3):uint())
end
register_postdissector(cnp)
