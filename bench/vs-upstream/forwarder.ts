// Runs inside a proxy's network namespace: listens on 127.0.0.1:PORT there and pipes every connection
// to a unix socket that the benchmark serves from the host's namespace (unix sockets are not
// per-namespace), which pipes it on to kube-apiserver. The proxy under test then reaches the API server
// at the same https://127.0.0.1:PORT as in the kubeconfig (so TLS names match), with no veth, route or
// address added to the host. Both proxies go through the same path.
//   ip netns exec NS node forwarder.js PORT SOCKET
import * as net from 'node:net';

const [port, socketPath] = [Number(process.argv[2]), process.argv[3]];
if (!Number.isInteger(port) || !socketPath) {
  process.stderr.write('usage: forwarder.js PORT SOCKET\n');
  process.exit(2);
}
const server = net.createServer((client) => {
  const upstream = net.connect(socketPath);
  client.pipe(upstream).pipe(client);
  const close = () => { client.destroy(); upstream.destroy(); };
  client.on('error', close);
  upstream.on('error', close);
  client.on('close', close);
  upstream.on('close', close);
});
server.listen(port, '127.0.0.1', () => process.stdout.write('ready\n'));
process.on('SIGTERM', () => process.exit(0));
