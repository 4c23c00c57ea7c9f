// Compile contracts/*.sol with solc-js (the pinned `solc` package: wasm, no binary download) and
// write each contract's ABI and bytecode to artifacts/<Name>.json. The output depends only on the
// sources and package-lock.json, so a rebuild gives the committed bytes.
//   node build.mjs          rewrite artifacts/
//   node build.mjs --check  exit 1 when artifacts/ differs from a fresh build
import { readFileSync, readdirSync, writeFileSync, existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const solc = require("solc");

const SETTINGS = {
  optimizer: { enabled: true, runs: 200 },
  viaIR: true,
  evmVersion: "cancun",
  outputSelection: { "*": { "*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object"] } },
};

function findImport(path) {
  const file = join(here, "node_modules", path);
  return existsSync(file) ? { contents: readFileSync(file, "utf8") } : { error: `not found: ${path}` };
}

const sources = {};
for (const name of readdirSync(join(here, "contracts")).sort()) {
  if (name.endsWith(".sol")) sources[`contracts/${name}`] = { content: readFileSync(join(here, "contracts", name), "utf8") };
}
const output = JSON.parse(
  solc.compile(JSON.stringify({ language: "Solidity", sources, settings: SETTINGS }), { import: findImport }),
);
const errors = (output.errors ?? []).filter((e) => e.severity === "error");
for (const e of output.errors ?? []) console.error(e.formattedMessage);
if (errors.length) process.exit(2);

let stale = [];
for (const source of Object.keys(sources)) {
  for (const [name, contract] of Object.entries(output.contracts[source])) {
    const artifact = {
      contractName: name,
      source,
      compiler: `solc-js ${solc.version()}`,
      settings: { optimizer: SETTINGS.optimizer, viaIR: SETTINGS.viaIR, evmVersion: SETTINGS.evmVersion },
      abi: contract.abi,
      bytecode: `0x${contract.evm.bytecode.object}`,
      deployedBytecode: `0x${contract.evm.deployedBytecode.object}`,
    };
    const text = `${JSON.stringify(artifact, null, 2)}\n`;
    const file = join(here, "artifacts", `${name}.json`);
    if (process.argv.includes("--check")) {
      if (!existsSync(file) || readFileSync(file, "utf8") !== text) stale.push(file);
    } else {
      writeFileSync(file, text);
    }
  }
}
if (stale.length) {
  console.error(`artifacts differ from a fresh build: ${stale.join(", ")}`);
  process.exit(1);
}
