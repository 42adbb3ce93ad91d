// Server-side label selectors, as kube-proxy's informers use them (cmd/kube-proxy/app/server.go):
// one informer factory for Services and EndpointSlices with
//   !service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless
// (the EndpointSlice controller copies a Service's labels onto its slices and marks the slices of
// headless Services with service.kubernetes.io/headless).
//
// kpng's --service-proxy-name NAME proxies unlabelled services *and* those labelled NAME. A label
// selector cannot say "absent or NAME", so with a name only the headless filter runs on the
// server, and the store leaves services labelled with another name alone (parseService).
import { LABEL_HEADLESS, LABEL_PROXY_NAME } from '../../model/parse';

export interface Selectors {
  services: string;
  endpointSlices: string;
}

export function selectorsFor(serviceProxyName: string): Selectors {
  const sel = serviceProxyName ? `!${LABEL_HEADLESS}` : `!${LABEL_PROXY_NAME},!${LABEL_HEADLESS}`;
  return { services: sel, endpointSlices: sel };
}

export const nodeFieldSelector = (node: string): string => `metadata.name=${node}`;
