// Digital Bazaar's verifier of eddsa-rdfc-2022 credentials over HTTP, the peer of Tessera's
// verification benchmark: `node verifier.mjs <port> <contexts.json>` answers POST /verify
// {"verifiableCredential": ...} with 200 {"verified": true} or 400, as Tessera's `POST /v1/vc/verify`.
// Contexts come from the JSON file (URL -> document, the contexts Tessera ships); did:key
// documents from the did:key driver; nothing is fetched.
import http from 'node:http';
import {readFileSync} from 'node:fs';
import * as vc from '@digitalbazaar/vc';
import {DataIntegrityProof} from '@digitalbazaar/data-integrity';
import {cryptosuite} from '@digitalbazaar/eddsa-rdfc-2022-cryptosuite';
import * as Ed25519Multikey from '@digitalbazaar/ed25519-multikey';
import * as didKey from '@digitalbazaar/did-method-key';

const [port, contextsFile] = process.argv.slice(2);
const contexts = JSON.parse(readFileSync(contextsFile, 'utf8'));
const didKeyDriver = didKey.driver();
const didKeyDocuments = new Map();
didKeyDriver.use({multibaseMultikeyHeader: 'z6Mk', fromMultibase: Ed25519Multikey.from});

async function documentLoader(url) {
  if(url in contexts) {
    return {contextUrl: null, documentUrl: url, document: contexts[url]};
  }
  if(url.startsWith('did:key:')) {
    // did:key documents are derived from the URL alone: each is built once.
    let document = didKeyDocuments.get(url);
    if(document === undefined) {
      document = await didKeyDriver.get({url});
      didKeyDocuments.set(url, document);
    }
    return {contextUrl: null, documentUrl: url, document};
  }
  throw new Error(`document not allowed: ${url}`);
}

const suite = new DataIntegrityProof({cryptosuite});

http.createServer((request, response) => {
  const chunks = [];
  request.on('data', chunk => chunks.push(chunk));
  request.on('end', async () => {
    let status = 400;
    let body = {verified: false};
    try {
      const {verifiableCredential: credential} = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const result = await vc.verifyCredential({credential, suite, documentLoader});
      status = result.verified ? 200 : 400;
      body = {verified: result.verified};
    } catch(error) {
      body = {verified: false, error: String(error)};
    }
    const payload = JSON.stringify(body);
    response.writeHead(status, {'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(payload)});
    response.end(payload);
  });
}).listen(Number(port), '127.0.0.1');
