import { parseObjectsText } from './objects-file';

const list = { apiVersion: 'v1', kind: 'List', items: [
  { apiVersion: 'v1', kind: 'Service', metadata: { name: 'a', namespace: 'default' } },
  { apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', metadata: { name: 'a-1', namespace: 'default' } },
  { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c' } },
] };

describe('parseObjectsText', () => {
  test('JSON (kubectl -o json) and YAML give the same objects', () => {
    const json = parseObjectsText(JSON.stringify(list, null, 2));
    const yaml = parseObjectsText(`apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata: {name: a, namespace: default}\n- apiVersion: discovery.k8s.io/v1\n  kind: EndpointSlice\n  metadata: {name: a-1, namespace: default}\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: c}\n`);
    expect(json).toEqual(yaml);
    expect(json.Service).toHaveLength(1);
    expect(json.EndpointSlice).toHaveLength(1);
    expect(json.ignored).toBe(1);
  });

  test('text that starts like JSON but is YAML still parses; broken text names the problem', () => {
    expect(parseObjectsText('{kind: Service, metadata: {name: a}}').Service).toHaveLength(1);
    expect(() => parseObjectsText('{"kind": "Service", ')).toThrow(/not valid YAML or JSON/);
  });
});
