// Drives the router binary with the official TypeScript MCP client over stdio and prints
// one JSON object with what each call returned. Usage: node client.mjs BINARY HUBU_URL GONGBU_URL STATE TOKEN
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [binary, hubuURL, gongbuURL, state, token] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command: binary,
  args: ["--hubu-url", hubuURL, "--gongbu-url", gongbuURL, "--state", state, "--wait", "5s", "--allow-private-image-hosts"],
  env: { HUBU_AGENT_TOKEN: token, PATH: process.env.PATH },
  stderr: "ignore",
});
const client = new Client({ name: "ts-client-test", version: "1.0.0" });
await client.connect(transport);

const fox = { prompt: "an origami fox", model: "flux-dev", width: 1024, height: 1024 };
const out = {};
out.tools = (await client.listTools()).tools.map((t) => t.name).sort();
out.first = await client.callTool({ name: "generate_image", arguments: fox, _meta: { "claudecode/toolUseId": "toolu_01ts17CFJDKv6NXm3vei5MkC" } });
out.again = await client.callTool({ name: "generate_image", arguments: fox, _meta: { "claudecode/toolUseId": "toolu_01ts17CFJDKv6NXm3vei5MkC" } });
out.noIdentity = await client.callTool({ name: "generate_image", arguments: fox, _meta: { "openai/session": "s" } });
out.inArguments = await client.callTool({ name: "generate_image", arguments: { ...fox, tool_use_id: "x" }, _meta: { "claudecode/toolUseId": "toolu_01ts2DntsQO7PjBKp24r1rAR" } });
out.failed = await client.callTool({ name: "generate_image", arguments: { ...fox, prompt: "a fox the provider refuses" }, _meta: { "claudecode/toolUseId": "toolu_01ts3ckdXcjnxuUhHP2aUnFe" } });
out.capabilities = await client.callTool({ name: "capabilities", arguments: {} });
out.status = await client.callTool({ name: "operation_status", arguments: { public_handle: out.first.structuredContent.public_handle } });
out.templates = (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
out.image = await client.readResource({ uri: out.first.structuredContent.result.resource_uri });
out.edit = await client.callTool({ name: "edit_image", arguments: { prompt: "make it blue", model: "flux-2-pro", input_images: [out.first.structuredContent.public_handle] }, _meta: { "claudecode/toolUseId": "toolu_01ts4EditQO7PjBKp24r1rAR" } });
await client.close();
process.stdout.write(JSON.stringify(out));
