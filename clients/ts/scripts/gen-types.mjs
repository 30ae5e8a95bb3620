// Generates src/protocol.ts, the TypeScript types of tulip's wire
// protocol, from the JSON Schemas in docs/schemas (json-schema-to-typescript).
//
//   node scripts/gen-types.mjs          writes src/protocol.ts
//   node scripts/gen-types.mjs --check  exits 1 when src/protocol.ts is out of date
import { readFile, readdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compile } from 'json-schema-to-typescript';

const here = dirname(fileURLToPath(import.meta.url));
const schemas = join(here, '..', '..', '..', 'docs', 'schemas');
const out = join(here, '..', 'src', 'protocol.ts');

// Types whose schema title would shadow a TypeScript global.
const renamed = { Record: 'LogRecord' };

// Two adjustments before compiling, neither changing what validates:
// a value that may be any JSON (a schema with no type, only words) is
// unknown, where json-schema-to-typescript would make it an object; and a
// $ref keeps no sibling description, so that every use of a schema is the
// one type (not Checkpoint and Checkpoint1).
function anyJSON(node) {
  if (Array.isArray(node)) return node.forEach(anyJSON);
  if (node === null || typeof node !== 'object') return;
  if (node.$ref) delete node.description;
  for (const [k, v] of Object.entries(node)) {
    if (k === 'properties' || k === '$defs') {
      for (const p of Object.values(v)) {
        if (Object.keys(p).every((w) => w === 'description' || w === 'title')) p.tsType = 'unknown';
      }
    }
    anyJSON(v);
  }
}

const files = (await readdir(schemas)).filter((f) => f.endsWith('.json')).sort();
let text = `/* Generated from docs/schemas by scripts/gen-types.mjs (json-schema-to-typescript): do not edit.
 * Regenerate with: npm run gen */
`;
for (const f of files) {
  const schema = JSON.parse(await readFile(join(schemas, f), 'utf8'));
  anyJSON(schema);
  // Each schema declares its own type; the types it refers to are
  // declared by their own files.
  text += '\n' + (await compile(schema, renamed[schema.title] ?? schema.title, {
    cwd: schemas,
    bannerComment: '',
    declareExternallyReferenced: false,
    customName: (s) => (s.title ? renamed[s.title] ?? s.title : undefined),
    format: true,
    style: { singleQuote: true },
  })).trim() + '\n';
}

if (process.argv.includes('--check')) {
  const have = await readFile(out, 'utf8').catch(() => '');
  if (have !== text) {
    console.error('clients/ts/src/protocol.ts is out of date with docs/schemas: run `npm run gen` in clients/ts');
    process.exit(1);
  }
} else {
  await writeFile(out, text);
}
