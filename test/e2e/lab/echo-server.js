#!/usr/bin/env node
// Lab echo server, run inside a pod (or node) network namespace.
// Answers every TCP connection and every UDP datagram with one JSON line:
//   {"name":..., "me": <local address>, "port": <local port>, "peer": <client address as seen>}
// Usage: node echo-server.js NAME PORTS   (PORTS: comma list, each served on TCP and UDP, v4 and v6)
'use strict';
const net = require('node:net');
const dgram = require('node:dgram');

const name = process.argv[2] || 'server';
const ports = (process.argv[3] || '8080').split(',').map(Number);
const strip = (a) => (a && a.startsWith('::ffff:') ? a.slice(7) : a);
let pending = 0;
const ready = () => { if (--pending === 0) process.stdout.write('ready\n'); };

for (const port of ports) {
  for (const host of ['0.0.0.0', '::']) {
    pending += 2;
    const srv = net.createServer((s) => {
      s.on('error', () => {});
      s.end(JSON.stringify({ name, me: strip(s.localAddress), port: s.localPort, peer: strip(s.remoteAddress) }) + '\n');
    });
    srv.listen({ host, port, ipv6Only: host === '::' }, ready);
    const u = dgram.createSocket({ type: host === '::' ? 'udp6' : 'udp4', ipv6Only: host === '::' });
    u.on('message', (_msg, rinfo) => {
      const addr = u.address();
      u.send(JSON.stringify({ name, me: addr.address, port: addr.port, peer: strip(rinfo.address) }) + '\n', rinfo.port, rinfo.address);
    });
    u.bind({ address: host, port }, ready);
  }
}
process.on('SIGTERM', () => process.exit(0));
