# METADATA
# title: Naive pure-Rego baseline (benchmarks only)
# description: |
#   The availability decision computed by Rego alone, straight from the raw
#   pydantic-ai history and the raw registry document, as a policy author
#   would write it for stock OPA without policycheck's Go-derived facts:
#
#   * input.history: the message history, exactly as
#     ModelMessagesTypeAdapter serializes it (a JSON array);
#   * input.registry: the registry document ({"capabilities", "tools"});
#   * the calls to judge are the tool-call parts of the last message when
#     that is a response.
#
#   It computes the conservative post-compaction window (spec §2.1, the
#   latest compaction part, part-level), the discovered names from all four
#   reveal forms (spec §3), the loaded capability ids from typed load
#   call/return pairs inside the window (spec §4), the available tools of
#   the next request and a verdict per call by the predicate of spec §6 V2.
#
#   It deliberately leaves out anchored evidence (spec §5), the cleaned
#   outgoing history behind `advertised` (spec §7), capability filters and
#   operator rules: it is a LOWER BOUND on the work a pure-Rego
#   implementation of the engine's decision must do. It assumes a history
#   the loader accepts (shape validation is not repeated here either).
#   It is not shipped and not an API: engine/bench_test.go measures it
#   against the engine and checks that it agrees with the default policy.
# entrypoint: true
package policycheck.baseline.naive

# --- registry -----------------------------------------------------------------

_capabilities := [c | some c in object.get(input.registry, "capabilities", [])]

_tools := [t | some t in object.get(input.registry, "tools", [])]

deferred_capabilities := {c.id | some c in _capabilities; object.get(c, "defer_loading", false) == true}

always_on_capabilities := {c.id | some c in _capabilities} - deferred_capabilities

tool_names := {t.name | some t in _tools}

_owner(t) := object.get(t, "capability", null)

# A tool owned by a deferred capability is deferred whatever its own flag says.
_deferred(t) if _owner(t) in deferred_capabilities

_deferred(t) if object.get(t, "defer_loading", false) == true

# load_capability is present while some capability is deferred; search_tools
# while some tool is search-gated (deferred, no deferred owner).
framework contains "load_capability" if count(deferred_capabilities) > 0

framework contains "search_tools" if {
	some t in _tools
	object.get(t, "defer_loading", false) == true
	not _owner(t) in deferred_capabilities
}

# --- history ------------------------------------------------------------------

_history := input.history

_n := count(_history)

_last := _history[_n - 1]

# at_or_after(m, p, w): part p of message m lies in the window starting at w.
_at_or_after(m, _, w) if m > w[0]

_at_or_after(m, p, w) if {
	m == w[0]
	p >= w[1]
}

# window_before(n): the conservative window of the first n messages
# (spec C1–C2): the latest compaction part of any response, [0, 0] if none.
_window_before(n) := w if {
	cs := [[m, p] |
		some m, msg in _history
		m < n
		msg.kind == "response"
		some p, part in msg.parts
		part.part_kind == "compaction"
	]
	count(cs) > 0
	w := cs[count(cs) - 1]
} else := [0, 0]

# METADATA
# title: window
# description: The start [message, part] of the conservative window of the whole history.
window := _window_before(_n)

# reveals(part): the names one part reveals (spec D1, the four forms).
_reveals(part) := names if {
	# typed local search return, or native (provider-side) search return
	part.part_kind in {"tool-return", "builtin-tool-return"}
	part.tool_kind == "tool-search"
	names := [x.name | some x in part.content.discovered_tools]
} else := names if {
	# legacy: an untyped search_tools return with metadata.discovered_tools
	part.part_kind == "tool-return"
	object.get(part, "tool_kind", null) == null
	part.tool_name == "search_tools"
	names := part.metadata.discovered_tools
	is_array(names)
	every x in names {
		is_string(x)
	}
} else := part.tools_added if {
	# delta; tools_added wins over the legacy alias "added"
	part.part_kind == "tool-availability-delta"
	part.tools_added
} else := part.added if {
	part.part_kind == "tool-availability-delta"
	part.added
} else := []

# METADATA
# title: discovered
# description: Discovered(window) over the whole history, the dispatched response included (spec D3, D5b).
discovered contains name if {
	some m, msg in _history
	some p, part in msg.parts
	_at_or_after(m, p, window)
	some name in _reveals(part)
}

# load_id(part): the capability id a typed load call names (spec L2).
_load_id(part) := id if {
	is_object(part.args)
	id := part.args.id
	is_string(id)
} else := id if {
	is_string(part.args)
	json.is_valid(part.args)
	args := json.unmarshal(part.args)
	is_object(args)
	id := args.id
	is_string(id)
}

# load_calls(w, n): the typed load calls with a known id and a tool_call_id,
# in order, within window w of the first n messages.
_load_calls(w, n) := [{"m": m, "p": p, "call_id": part.tool_call_id, "id": id} |
	some m, msg in _history
	m < n
	some p, part in msg.parts
	part.part_kind == "tool-call"
	part.tool_kind == "capability-load"
	is_string(part.tool_call_id)
	_at_or_after(m, p, w)
	id := _load_id(part)
]

# loaded_in(w, n): Loaded(window w of the first n messages) (spec L1–L3): a
# typed load return counts when an earlier typed call inside the window
# carries its tool_call_id; the latest such call names the capability.
_loaded_in(w, n) := {id |
	calls := _load_calls(w, n)
	some m, msg in _history
	m < n
	some p, part in msg.parts
	part.part_kind == "tool-return"
	part.tool_kind == "capability-load"
	_at_or_after(m, p, w)
	earlier := [c.id |
		some c in calls
		c.call_id == part.tool_call_id
		_at_or_after(m, p, [c.m, c.p])
		[c.m, c.p] != [m, p]
	]
	count(earlier) > 0
	id := earlier[count(earlier) - 1]
}

# METADATA
# title: loaded
# description: Loaded(window) over the whole history (spec L4).
loaded := _loaded_in(window, _n)

# METADATA
# title: dispatch_loaded
# description: |
#   Loads are read before the dispatched response (spec L5): Loaded over the history without it.
dispatch_loaded := _loaded_in(_window_before(_n - 1), _n - 1)

# --- availability (spec §6 V2, no anchored evidence) ----------------------------

# The owner is active: none, always-on, or a loaded deferred capability.
_owner_active(t, _) if _owner(t) == null

_owner_active(t, _) if _owner(t) in always_on_capabilities

_owner_active(t, loaded_ids) if {
	c := _owner(t)
	c in deferred_capabilities
	c in loaded_ids
}

# V2 step 1: a tool that is not deferred is always available.
_is_available(t, _, _) if not _deferred(t)

# V2 step 3: the load of a configured-deferred owner is the reveal.
_is_available(t, _, loaded_ids) if {
	c := _owner(t)
	c in deferred_capabilities
	c in loaded_ids
}

# V2 steps 4–5: revealed, and the owner (if any) active.
_is_available(t, discovered_names, loaded_ids) if {
	t.name in discovered_names
	_owner_active(t, loaded_ids)
}

_available(discovered_names, loaded_ids) := {t.name |
	some t in _tools
	_is_available(t, discovered_names, loaded_ids)
} | framework

# METADATA
# title: available
# description: The tools callable on the next request.
available := _available(discovered, loaded)

# METADATA
# title: dispatch_available
# description: The tools callable by the dispatched response (no anchored evidence).
dispatch_available := _available(discovered, dispatch_loaded)

# --- verdicts (spec §8, without filters and rules) ------------------------------

_fixed_names := {"tool-search": "search_tools", "capability-load": "load_capability"}

_call_name(part) := part.tool_name

_call_name(part) := _fixed_names[part.tool_kind] if not part.tool_name

_verdict(name) := "unknown_tool" if {
	not name in (tool_names | framework)
} else := "not_available_yet" if {
	not name in framework
	not name in dispatch_available
} else := "execute"

# METADATA
# title: verdicts
# description: One verdict per tool-call part of the last message when it is a response.
default verdicts := []

verdicts := [{"tool_call_id": object.get(part, "tool_call_id", null), "tool": name, "verdict": _verdict(name)} |
	_last.kind == "response"
	some part in _last.parts
	part.part_kind == "tool-call"
	name := _call_name(part)
]

# METADATA
# title: decision
# description: Everything the benchmark reads, in one document.
decision := {
	"window": window,
	"discovered": discovered,
	"loaded": loaded,
	"available": available,
	"verdicts": verdicts,
}
