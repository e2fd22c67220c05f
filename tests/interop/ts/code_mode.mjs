// The official TypeScript SDK's stdio client running scripts through evod's
// run_code, driven by tests/interop/test_code_mode.py. Usage: node code_mode.mjs
// EVOCTL SOCKET (the client starts `evoctl shim` on that evod). It lists tools,
// runs a script chaining mcp-server-time, server-everything and the fixture,
// runs one past its time limit, then calls a tool directly, and prints a JSON
// report on stdout (one object), or an error and exit 1.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [evoctl, socket] = process.argv.slice(2);
const text = (r) => (r.content ?? []).map((c) => c.text ?? "").join("\n");
const client = new Client({ name: "evo-ts-code-mode", version: "1.0.0" });
const transport = new StdioClientTransport({
  command: evoctl,
  args: ["--socket", socket, "shim", "--mode", "legacy", "--no-autostart"],
  stderr: "inherit",
});
const shaped = (r) => ({ isError: r.isError ?? false, text: text(r), structured: r.structuredContent ?? null });

const CHAIN = `
const now = await tools.time_get_current_time({timezone: "Asia/Tokyo"});
const sum = await tools["everything_get-sum"]({a: 40, b: 2});
const n = await tools.fx_add({a: 40, b: 2});
return {tz: now.timezone, sum, n};
`;

try {
  await client.connect(transport);
  const tools = (await client.listTools()).tools;
  const report = {
    tools: tools.map((t) => t.name),
    runCodeSchema: tools.find((t) => t.name === "run_code")?.inputSchema ?? null,
  };
  report.chain = shaped(await client.callTool({ name: "run_code", arguments: { code: CHAIN } }));
  report.limit = shaped(
    await client.callTool({
      name: "run_code",
      arguments: { code: "console.log('ts'); for (;;) {}", timeout_ms: 250 },
    }),
  );
  report.after = text(await client.callTool({ name: "fx_add", arguments: { a: 2, b: 3 } }));
  console.log(JSON.stringify(report));
  await client.close();
} catch (e) {
  console.error(`code_mode.mjs: ${e?.stack ?? e}`);
  process.exit(1);
}
