// Preloaded (`node --require`) into servers that take no host option (server-everything's
// HTTP modes call `app.listen(PORT)`, which listens on every interface): a listen given a port
// and no host binds 127.0.0.1, so a test server is never reachable from outside the machine.
"use strict";
const net = require("node:net");

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const [first] = args;
  const portOnly = typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first));
  if (portOnly && (args.length === 1 || typeof args[1] === "function")) {
    args.splice(1, 0, "127.0.0.1");
  } else if (first !== null && typeof first === "object" && "port" in first && !first.host) {
    args[0] = { ...first, host: "127.0.0.1" };
  }
  return listen.apply(this, args);
};
