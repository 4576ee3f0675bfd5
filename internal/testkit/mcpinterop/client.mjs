// The TypeScript client of the interoperability tests: the official
// TypeScript SDK (@modelcontextprotocol/sdk, installed by
// scripts/mcp-deps.sh) runs a scripted session and prints what each step
// saw, as the Go SDK's client does in script.go, so that one set of
// assertions holds both clients.
//
// Usage: node client.mjs DEPS SCRIPT.json
//
// DEPS is the directory scripts/mcp-deps.sh installed into; SCRIPT is a
// Script (script.go): connections by name, each a streamable HTTP URL
// with an optional bearer token, or a stdio command, and the steps. The
// output is one JSON document, a list of StepResult.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [deps, scriptPath] = process.argv.slice(2);
if (!deps || !scriptPath) {
	console.error("usage: node client.mjs DEPS SCRIPT.json");
	process.exit(2);
}
const sdk = join(deps, "node_modules", "@modelcontextprotocol", "sdk", "dist", "esm");
const load = (p) => import(pathToFileURL(join(sdk, p)).href);
const { Client } = await load("client/index.js");
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
const { StdioClientTransport } = await load("client/stdio.js");
const { ElicitRequestSchema, ToolListChangedNotificationSchema } = await load("types.js");

const script = JSON.parse(readFileSync(scriptPath, "utf8"));

// Each connection's client, and what reached it between steps: the
// elicitation requests it answered and the list_changed notifications.
const conns = {};
async function connect(name) {
	if (conns[name]) return conns[name];
	const spec = script.connections[name];
	if (!spec) throw new Error(`the script names no connection ${name}`);
	const seen = { elicitations: [], listChanged: 0 };
	const client = new Client(
		{ name: "policycheck-interop-ts", version: "1.0.0" },
		{ capabilities: spec.elicit ? { elicitation: {} } : {} },
	);
	if (spec.elicit) {
		client.setRequestHandler(ElicitRequestSchema, async (req) => {
			seen.elicitations.push({ message: req.params.message, requestedSchema: req.params.requestedSchema ?? null });
			if (spec.elicit === "accept") return { action: "accept", content: spec.elicitContent ?? {} };
			return { action: spec.elicit };
		});
	}
	client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
		seen.listChanged++;
	});
	let transport;
	if (spec.url) {
		const headers = {};
		if (spec.token) headers.Authorization = `Bearer ${spec.token}`;
		transport = new StreamableHTTPClientTransport(new URL(spec.url), { requestInit: { headers } });
	} else {
		transport = new StdioClientTransport({
			command: spec.command[0],
			args: spec.command.slice(1),
			env: { ...process.env, ...(spec.env ?? {}) },
			stderr: "ignore",
		});
	}
	await client.connect(transport);
	conns[name] = { client, seen, transport, meta: spec.meta };
	return conns[name];
}

const results = [];
for (const step of script.steps) {
	const out = { connection: step.connection, op: step.op };
	try {
		const { client, seen, transport, meta } = await connect(step.connection);
		if (transport.protocolVersion) out.protocol = transport.protocolVersion;
		if (step.op === "list") {
			const r = await client.listTools(meta ? { _meta: meta } : undefined);
			out.tools = r.tools.map((t) => ({ name: t.name, description: t.description ?? "" }));
		} else if (step.op === "call") {
			out.name = step.name;
			const r = await client.callTool({ name: step.name, arguments: step.arguments ?? {}, ...(meta ? { _meta: meta } : {}) });
			out.result = { content: r.content ?? [], isError: r.isError === true, structuredContent: r.structuredContent ?? null };
		} else {
			throw new Error(`unknown op ${step.op}`);
		}
		// Notifications that arrive just after a response are counted on
		// the next step: the script asserts on "at some point".
		out.elicitations = seen.elicitations.splice(0);
		out.listChanged = seen.listChanged;
		seen.listChanged = 0;
	} catch (e) {
		out.error = String(e && e.message ? e.message : e);
	}
	results.push(out);
}
for (const { client } of Object.values(conns)) {
	await client.close();
}
process.stdout.write(JSON.stringify(results, null, 1) + "\n");
