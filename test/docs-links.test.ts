// The docs stay navigable: every relative link in the README, docs/, bench/README.md and the READMEs
// beside the code resolves to a file (and, with #anchor, to a heading of it); the README and every page
// of docs/ stay short; the aggregator example shown in docs/aggregator.md is the file the tests load.
import * as fs from 'node:fs';
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '..');

function markdownFiles(): string[] {
  const out = ['README.md', 'bench/README.md'];
  const walk = (dir: string): void => {
    for (const e of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
      const rel = path.posix.join(dir, e.name);
      if (e.isDirectory()) walk(rel);
      else if (e.name.endsWith('.md')) out.push(rel);
    }
  };
  walk('docs');
  for (const dir of ['src', 'native', 'examples', 'hack']) {
    const find = (d: string): void => {
      for (const e of fs.readdirSync(path.join(ROOT, d), { withFileTypes: true })) {
        const rel = path.posix.join(d, e.name);
        if (e.isDirectory()) find(rel);
        else if (e.name === 'README.md') out.push(rel);
      }
    };
    find(dir);
  }
  return out;
}

// GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens.
function anchors(text: string): Set<string> {
  const out = new Set<string>();
  let fenced = false;
  for (const line of text.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const m = !fenced && /^#{1,6} (.*)$/.exec(line);
    if (m) out.add(m[1].trim().toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, '').replace(/ /g, '-'));
  }
  return out;
}

function links(text: string): string[] {
  const noCode = text.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
  return [...noCode.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]);
}

describe('docs', () => {
  const files = markdownFiles();

  test('the README is at most 200 lines', () => {
    const lines = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8').split('\n');
    if (lines[lines.length - 1] === '') lines.pop();
    expect(lines.length).toBeLessThanOrEqual(200);
  });

  // The docs are pages a user reads through: a page that grows past 200 lines is split by topic.
  test.each(files.filter((f) => f.startsWith('docs/')))('%s is at most 200 lines', (file) => {
    const lines = fs.readFileSync(path.join(ROOT, file), 'utf8').split('\n');
    if (lines[lines.length - 1] === '') lines.pop();
    expect(lines.length).toBeLessThanOrEqual(200);
  });

  test('the README says that make test runs every test (.ci/run runs it)', () => {
    expect(fs.readFileSync(path.join(ROOT, '.ci/run'), 'utf8')).toMatch(/^make test$/m);
    expect(fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8')).toMatch(/^make test +# every test/m);
  });

  test.each(files)('every relative link in %s resolves', (file) => {
    const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
    const broken: string[] = [];
    for (const link of links(text)) {
      if (/^[a-z]+:/i.test(link)) continue; // http(s), mailto
      const [target, anchor] = link.split('#');
      const abs = target ? path.resolve(ROOT, path.dirname(file), target) : path.join(ROOT, file);
      const rel = path.relative(ROOT, abs).split(path.sep).join('/');
      if (!fs.existsSync(abs)) {
        broken.push(`${link} (no ${rel})`);
        continue;
      }
      if (anchor && abs.endsWith('.md') && !anchors(fs.readFileSync(abs, 'utf8')).has(anchor)) {
        broken.push(`${link} (no heading #${anchor} in ${rel})`);
      }
    }
    expect(broken).toEqual([]);
  });

  test("docs/aggregator.md shows examples/aggregator/denylist.yaml as it is", () => {
    const example = fs.readFileSync(path.join(ROOT, 'examples/aggregator/denylist.yaml'), 'utf8')
      .split('\n').filter((l) => !l.startsWith('#')).join('\n');
    const doc = fs.readFileSync(path.join(ROOT, 'docs/aggregator.md'), 'utf8');
    const shown = /```yaml\n([\s\S]*?)```/.exec(doc)?.[1];
    expect(shown).toBe(example);
  });
});
