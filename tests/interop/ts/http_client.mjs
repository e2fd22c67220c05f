// The official TypeScript SDK's Streamable HTTP client against evod, driven by
// tests/interop/test_http_ts.py. Usage: node http_client.mjs URL TOKEN
// It runs one scenario after another on one connection and prints a JSON
// report on stdout (one object), or an error and exit 1.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  ElicitRequestSchema,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const [url, token, tag] = process.argv.slice(2);
const text = (r) => (r.content ?? []).map((c) => c.text ?? "").join("\n");

const report = { elicited: [], listChanged: 0, progress: [], ms: {} };
const started = Date.now();
const mark = (what) => (report.ms[what] = Date.now() - started);
const client = new Client(
  { name: "evo-ts-interop", version: "1.0.0" },
  { capabilities: { elicitation: {} } },
);
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  report.elicited.push(request.params.message);
  return { action: "accept", content: {} };
});
let listChanged;
const changed = new Promise((resolve) => (listChanged = resolve));
client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
  report.listChanged += 1;
  listChanged();
});
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: token ? { headers: { Authorization: `Bearer ${token}` } } : undefined,
});

try {
  await client.connect(transport);
  report.protocolVersion = transport.protocolVersion ?? null;
  report.sessionId = transport.sessionId ?? null;
  mark("tools");
  report.tools = (await client.listTools()).tools.map((t) => t.name);
  mark("add");
  report.add = text(await client.callTool({ name: "fx_add", arguments: { a: 20, b: 22 } }));
  mark("discover");
  report.discover = text(
    await client.callTool({ name: "discover_tools", arguments: { query: "add two numbers", limit: 3 } }),
  );
  const progressed = await client.callTool(
    { name: "fx_progress", arguments: { steps: 3 } },
    undefined,
    { onprogress: (p) => report.progress.push(p.progress) },
  );
  mark("progressError");
  report.progressError = progressed.isError ?? false;
  // Cancellation: abort a long call; evod forwards notifications/cancelled.
  const controller = new AbortController();
  const sleeping = client.callTool(
    { name: "fx_sleep", arguments: { ms: 40000 + Number(tag ?? 0) } },
    undefined,
    { signal: controller.signal, timeout: 60000 },
  );
  setTimeout(() => controller.abort("the test cancels it"), 700);
  mark("cancelled");
  report.cancelled = await sleeping.then(
    () => false,
    (e) => String(e?.message ?? e),
  );
  // Approval by elicitation (fx_cwd requires approval).
  const approved = await client.callTool({ name: "fx_cwd", arguments: {} });
  mark("approved");
  report.approved = { isError: approved.isError ?? false, text: text(approved) };
  // list_changed when the catalog changes.
  await client.callTool({ name: "fx_add_tool", arguments: { name: `from_ts_${tag ?? 0}` } });
  let timer;
  await Promise.race([changed, new Promise((r) => (timer = setTimeout(r, 10000)))]);
  clearTimeout(timer);
  mark("toolsAfter");
  report.toolsAfter = (await client.listTools()).tools.map((t) => t.name);
  mark("end");
  await transport.terminateSession();
  await client.close();
  console.log(JSON.stringify(report));
} catch (e) {
  console.error(`ts client failed: ${e?.stack ?? e}`);
  console.log(JSON.stringify({ ...report, failed: String(e?.message ?? e) }));
  process.exit(1);
}
