// The official TypeScript SDK's stdio client on a fresh start, driven by
// tests/interop/test_first_start.py. Usage: node first_start.mjs COMMAND ARGS...
// (the shim that starts evod; its environment is this process's). It connects at once,
// reads what initialize said, lists resources, calls time_get_current_time, and prints a
// JSON report on stdout (one object), or an error and exit 1.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = process.argv.slice(2);
const text = (r) => (r.content ?? []).map((c) => c.text ?? "").join("\n");
const client = new Client({ name: "evo-ts-first-start", version: "1.0.0" });
const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });

try {
  await client.connect(transport);
  const report = {
    capabilities: client.getServerCapabilities() ?? {},
    instructions: client.getInstructions() ?? "",
  };
  report.resources = (await client.listResources()).resources.map((r) => r.uri);
  report.now = text(await client.callTool({ name: "time_get_current_time", arguments: { timezone: "UTC" } }));
  console.log(JSON.stringify(report));
  await client.close();
} catch (e) {
  console.error(`first_start.mjs: ${e?.stack ?? e}`);
  process.exit(1);
}
