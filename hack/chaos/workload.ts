// What the probes talk to and what keeps the endpoints changing, in namespace "chaos":
//   chaos-echo    NodePort Service: HTTP 80, UDP 81, a TCP echo 9000 (socat), on a stable pod per node
//                 and on chaos-churn's pods, which the churn loop scales between 1 and 3 every 6 s;
//   chaos-long    ClusterIP Service of the stable pods' echo only: the long-lived connection (churned
//                 pods would end it by leaving, which is no fault of the proxy);
//   chaos-marker  ClusterIP Service whose selector a scenario flips between pod chaos-mark-a and -b:
//                 the client that first gets the other pod's name tells when its node's proxy had
//                 the change in its rules;
//   chaos-client-<node>  a client pod per node: new TCP (HTTP) and UDP exchanges to chaos-echo, one
//                 TCP connection to chaos-long held open with a message every 0.2 s, and the marker,
//                 each a line "<EPOCHREALTIME> <probe> ok|fail|<pod>" (probes.ts parses them).
// Serving pods say they are ready only when they answer, and leave gracefully (preStop 5 s): the churn
// alone must cost no connection, or the baseline scenario shows it.
import { type Cluster, kubectl, sleep, until } from './cluster';
import type { ScaleEvent } from './explain';
import { parseProbeLine, type ProbeEvent } from './probes';

export const NS = 'chaos';

/** The serving pod's spec fields, indented by `pad` (a pod's spec or a Deployment's template). */
function echoContainers(agnhost: string, pad: string): string {
  return `
      terminationGracePeriodSeconds: 15
      containers:
      - name: netexec
        image: ${agnhost}
        args: [netexec, --http-port=8080, --udp-port=8081]
        readinessProbe: {httpGet: {path: /hostname, port: 8080}, periodSeconds: 1}
        lifecycle: {preStop: {exec: {command: [sleep, "5"]}}}
      - name: echo
        image: ${agnhost}
        command: [socat, 'TCP-LISTEN:9000,fork,reuseaddr', 'EXEC:cat']
        readinessProbe: {tcpSocket: {port: 9000}, periodSeconds: 1}
        lifecycle: {preStop: {exec: {command: [sleep, "5"]}}}`.replace(/\n {6}/g, `\n${pad}`);
}

const CLIENT_SCRIPT = String.raw`
tcp() { while :; do s=$EPOCHREALTIME; if curl -sf --max-time 2 -o /dev/null "http://$CHAOS_ECHO_SERVICE_HOST/hostname"; then echo "$s tcp ok"; else echo "$s tcp fail curl-$?"; fi; sleep 0.2; done; }
udp() { while :; do s=$EPOCHREALTIME; if exec 3<>"/dev/udp/$CHAOS_ECHO_SERVICE_HOST/81" && printf hostname >&3 && read -t 2 -N 8 -r r <&3; then echo "$s udp ok"; else echo "$s udp fail"; fi; exec 3>&-; sleep 0.2; done; }
long() { while :; do
  s=$EPOCHREALTIME
  if ! exec 3<>"/dev/tcp/$CHAOS_LONG_SERVICE_HOST/9000"; then echo "$s long fail connect"; sleep 0.2; continue; fi
  n=0
  while :; do s=$EPOCHREALTIME
    if printf 'm%d\n' $n >&3 && read -t 2 -r line <&3 && [[ $line == m$n ]]; then echo "$s long ok"; else echo "$s long fail broken"; break; fi
    n=$((n + 1)); sleep 0.2
  done
  exec 3>&-
done; }
marker() { while :; do s=$EPOCHREALTIME; m=$(curl -sf --max-time 1 "http://$CHAOS_MARKER_SERVICE_HOST/hostname"); [[ -n $m ]] || m=none; echo "$s marker $m"; sleep 0.2; done; }
tcp & udp & long & marker & wait`;

export function manifests(c: Cluster): string {
  const agnhost = c.images.agnhost;
  if (!agnhost) throw new Error('no agnhost image in the cluster (hack/cluster/images.sh)');
  const nodes = c.plan.nodes.map((n) => n.name);
  const docs: string[] = [`apiVersion: v1
kind: Namespace
metadata: {name: ${NS}}`, `apiVersion: v1
kind: Service
metadata: {name: chaos-echo, namespace: ${NS}}
spec:
  type: NodePort
  selector: {app: chaos-echo}
  ports:
  - {name: http, port: 80, targetPort: 8080, protocol: TCP}
  - {name: udp, port: 81, targetPort: 8081, protocol: UDP}
  - {name: echo, port: 9000, targetPort: 9000, protocol: TCP}`, `apiVersion: v1
kind: Service
metadata: {name: chaos-long, namespace: ${NS}}
spec:
  selector: {app: chaos-echo, role: stable}
  ports: [{port: 9000, targetPort: 9000}]`, `apiVersion: v1
kind: Service
metadata: {name: chaos-marker, namespace: ${NS}}
spec:
  selector: {mark: a}
  ports: [{port: 80, targetPort: 8080}]`, `apiVersion: apps/v1
kind: Deployment
metadata: {name: chaos-churn, namespace: ${NS}}
spec:
  replicas: 1
  selector: {matchLabels: {app: chaos-echo, role: churn}}
  template:
    metadata: {labels: {app: chaos-echo, role: churn}}
    spec:${echoContainers(agnhost, '      ')}`];
  for (const n of nodes) {
    docs.push(`apiVersion: v1
kind: Pod
metadata: {name: chaos-stable-${n}, namespace: ${NS}, labels: {app: chaos-echo, role: stable}}
spec:
  nodeName: ${n}${echoContainers(agnhost, '  ')}`);
  }
  nodes.forEach((n, i) => {
    const mark = String.fromCharCode(97 + i);
    docs.push(`apiVersion: v1
kind: Pod
metadata: {name: chaos-mark-${mark}, namespace: ${NS}, labels: {mark: ${mark}}}
spec:
  nodeName: ${n}
  containers:
  - {name: netexec, image: ${agnhost}, args: [netexec, --http-port=8080], readinessProbe: {httpGet: {path: /hostname, port: 8080}, periodSeconds: 1}}`);
  });
  return docs.join('\n---\n');
}

export function clientManifests(c: Cluster): string {
  return c.plan.nodes.map((n) => `apiVersion: v1
kind: Pod
metadata: {name: chaos-client-${n.name}, namespace: ${NS}, labels: {app: chaos-client}}
spec:
  nodeName: ${n.name}
  terminationGracePeriodSeconds: 1
  containers:
  - name: client
    image: ${c.images.agnhost}
    command: [bash, -c]
    args:
    - |${CLIENT_SCRIPT.trim().split('\n').map((l) => `\n      ${l}`).join('')}`).join('\n---\n');
}

/** The workload applied and ready; the clients start once the Services exist (their addresses come in the environment). */
export async function deployWorkload(c: Cluster): Promise<{ nodePort: number }> {
  await kubectl(c, ['delete', 'namespace', NS, '--ignore-not-found', '--wait=true'], { timeoutMs: 120_000 });
  await kubectl(c, ['apply', '-f', '-'], { input: manifests(c) });
  await kubectl(c, ['-n', NS, 'wait', '--for=condition=Ready', 'pod', '--all', '--timeout=180s'], { timeoutMs: 200_000 });
  await kubectl(c, ['apply', '-f', '-'], { input: clientManifests(c) });
  await kubectl(c, ['-n', NS, 'wait', '--for=condition=Ready', 'pod', '-l', 'app=chaos-client', '--timeout=120s'], { timeoutMs: 140_000 });
  const np = await kubectl(c, ['-n', NS, 'get', 'service', 'chaos-echo', '-o', 'jsonpath={.spec.ports[?(@.name=="echo")].nodePort}']);
  return { nodePort: Number(np.stdout.trim()) };
}

export async function removeWorkload(c: Cluster): Promise<void> {
  await kubectl(c, ['delete', 'namespace', NS, '--ignore-not-found', '--wait=false'], { allowFail: true });
}

/** The marker Service's selector moved to the other pod; the name of the pod that now serves it. */
export async function flipMarker(c: Cluster, to: 'a' | 'b'): Promise<string> {
  await kubectl(c, ['-n', NS, 'patch', 'service', 'chaos-marker', '-p', JSON.stringify({ spec: { selector: { mark: to } } })]);
  return `chaos-mark-${to}`;
}

/**
 * When (seconds since the epoch) the marker's EndpointSlice first names `pod` and no other, polled
 * every 0.2 s for at most a minute: what the endpoint controller took, apart from the proxy.
 */
export async function markerSliceAt(c: Cluster, pod: string): Promise<number | undefined> {
  return until(async () => {
    const r = await kubectl(c, ['-n', NS, 'get', 'endpointslices', '-l', 'kubernetes.io/service-name=chaos-marker', '-o', 'jsonpath={.items[*].endpoints[*].targetRef.name}'], { allowFail: true, timeoutMs: 3000 });
    return r.code === 0 && r.stdout.trim() === pod;
  }, 60_000, 200);
}

/** Endpoint churn: chaos-churn scaled 3, 1, 3, ... every `everyMs` until stopped. Counts what went through. */
export class Churn {
  ok = 0;
  failed = 0;
  /** Every scale operation that went through, stamped when it was asked for. */
  readonly scales: ScaleEvent[] = [];
  private stopped = false;
  private done: Promise<void> = Promise.resolve();

  constructor(private readonly c: Cluster, private readonly everyMs = 6000) {}

  start(): void {
    this.stopped = false;
    this.done = (async () => {
      for (let up = true; !this.stopped; up = !up) {
        const t = Date.now() / 1000;
        const r = await kubectl(this.c, ['-n', NS, 'scale', 'deployment', 'chaos-churn', `--replicas=${up ? 3 : 1}`], { allowFail: true, timeoutMs: 5000 });
        if (r.code === 0) { this.ok++; this.scales.push({ t, replicas: up ? 3 : 1 }); }
        else this.failed++;
        await sleep(this.everyMs);
      }
    })();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.done;
  }
}

/** The client pods' probe events since `since` (seconds since the epoch). */
export async function clientEvents(c: Cluster, since: number): Promise<ProbeEvent[]> {
  const out: ProbeEvent[] = [];
  const sinceTime = new Date((since - 5) * 1000).toISOString();
  for (const n of c.plan.nodes) {
    const r = await kubectl(c, ['-n', NS, 'logs', `chaos-client-${n.name}`, `--since-time=${sinceTime}`], { allowFail: true, timeoutMs: 60_000 });
    for (const line of r.stdout.split('\n')) {
      const e = parseProbeLine(line, n.name);
      if (e && e.t >= since) out.push(e);
    }
  }
  return out;
}
