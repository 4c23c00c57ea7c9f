// Digital Bazaar's VC libraries as a holder and as a verifier, one step per run:
// `node vc.mjs <step>` reads {contexts, documents, ...} as JSON on stdin and prints JSON.
// `contexts` names a JSON file (URL -> context document, the contexts Tessera ships), `documents` maps
// DIDs to documents the test read from Tessera (its did:web documents); did:key documents come from
// the did:key driver. Nothing is fetched.
//
// Steps:
//   keys {types}                                   -> [{type, id, controller, publicKeyMultibase, secretKeyMultibase}]
//   derive {credential, selectivePointers, presentationHeader?}  -> the derived credential
//   present {credentials, key, cryptosuite, challenge, domain, holder?, version?}  -> a signed presentation
//   verify-presentation {presentation, challenge, domain, holder?}  -> {verified, errors}
//   verify-credential {credential, expectedPresentationHeader?}     -> {verified, errors}
// Presentation headers are strings, used as their UTF-8 bytes (as Tessera reads them).
import {readFileSync} from 'node:fs';
import * as vc from '@digitalbazaar/vc';
import {DataIntegrityProof} from '@digitalbazaar/data-integrity';
import {cryptosuite as eddsaRdfc2022} from '@digitalbazaar/eddsa-rdfc-2022-cryptosuite';
import {cryptosuite as ecdsaRdfc2019} from '@digitalbazaar/ecdsa-rdfc-2019-cryptosuite';
import * as eddsaJcs2022 from '@digitalbazaar/eddsa-jcs-2022-cryptosuite';
import * as ecdsaJcs2019 from '@digitalbazaar/ecdsa-jcs-2019-cryptosuite';
import * as ecdsaSd2023 from '@digitalbazaar/ecdsa-sd-2023-cryptosuite';
import * as bbs2023 from '@digitalbazaar/bbs-2023-cryptosuite';
import * as Ed25519Multikey from '@digitalbazaar/ed25519-multikey';
import * as EcdsaMultikey from '@digitalbazaar/ecdsa-multikey';
import * as Bls12381Multikey from '@digitalbazaar/bls12-381-multikey';
import * as didKey from '@digitalbazaar/did-method-key';

const SIGNING_SUITES = {
  'eddsa-rdfc-2022': () => eddsaRdfc2022,
  'ecdsa-rdfc-2019': () => ecdsaRdfc2019,
  'eddsa-jcs-2022': () => eddsaJcs2022.createSignCryptosuite(),
  'ecdsa-jcs-2019': () => ecdsaJcs2019.createSignCryptosuite()
};

const step = process.argv[2];
const input = JSON.parse(readFileSync(0, 'utf8'));
const contexts = input.contexts ? JSON.parse(readFileSync(input.contexts, 'utf8')) : {};
const documents = input.documents || {};

const didKeyDriver = didKey.driver();
didKeyDriver.use({multibaseMultikeyHeader: 'z6Mk', fromMultibase: Ed25519Multikey.from});
didKeyDriver.use({multibaseMultikeyHeader: 'zDna', fromMultibase: EcdsaMultikey.from});
didKeyDriver.use({multibaseMultikeyHeader: 'z82L', fromMultibase: EcdsaMultikey.from});
didKeyDriver.use({multibaseMultikeyHeader: 'zUC7', fromMultibase: Bls12381Multikey.from});

async function documentLoader(url) {
  if(url in contexts) {
    return {contextUrl: null, documentUrl: url, document: contexts[url]};
  }
  if(url.startsWith('did:key:')) {
    return {contextUrl: null, documentUrl: url, document: await didKeyDriver.get({url})};
  }
  const [did, fragment] = url.split('#');
  if(did in documents) {
    const document = documents[did];
    if(fragment === undefined) {
      return {contextUrl: null, documentUrl: url, document};
    }
    const method = (document.verificationMethod || []).find(entry => entry.id === url);
    if(method) {
      return {
        contextUrl: null, documentUrl: url, document: {'@context': document['@context'], ...method}
      };
    }
  }
  throw new Error(`document not allowed: ${url}`);
}

const encoder = new TextEncoder();

function verifySuites({expectedPresentationHeader} = {}) {
  const bbsOptions = expectedPresentationHeader === undefined ? {} :
    {expectedPresentationHeader: encoder.encode(expectedPresentationHeader)};
  return [
    new DataIntegrityProof({cryptosuite: eddsaRdfc2022}),
    new DataIntegrityProof({cryptosuite: ecdsaRdfc2019}),
    new DataIntegrityProof({cryptosuite: eddsaJcs2022.createVerifyCryptosuite()}),
    new DataIntegrityProof({cryptosuite: ecdsaJcs2019.createVerifyCryptosuite()}),
    new DataIntegrityProof({cryptosuite: ecdsaSd2023.createVerifyCryptosuite()}),
    new DataIntegrityProof({cryptosuite: bbs2023.createVerifyCryptosuite(bbsOptions)})
  ];
}

// Status lists are Tessera's to check: these steps check proofs, holders, challenges and domains.
const checkStatus = async () => ({verified: true});

async function keyPairOf({type, id, controller, publicKeyMultibase, secretKeyMultibase}) {
  const module = type === 'Ed25519' ? Ed25519Multikey : EcdsaMultikey;
  return module.from({id, controller, publicKeyMultibase, secretKeyMultibase});
}

function errorsOf(result) {
  const errors = [];
  const collect = error => {
    if(!error) {
      return;
    }
    for(const item of [].concat(error.errors || error)) {
      errors.push(String(item.message || item));
    }
  };
  collect(result.error);
  for(const entry of result.presentationResult?.results || []) {
    collect(entry.error);
  }
  for(const entry of result.credentialResults || []) {
    collect(entry.error);
  }
  return errors;
}

const steps = {
  async keys({types}) {
    const keys = [];
    for(const type of types) {
      const keyPair = type === 'Ed25519' ? await Ed25519Multikey.generate() :
        await EcdsaMultikey.generate({curve: type});
      const exported = await keyPair.export({publicKey: true, secretKey: true, includeContext: false});
      const controller = `did:key:${exported.publicKeyMultibase}`;
      keys.push({
        type, controller, id: `${controller}#${exported.publicKeyMultibase}`,
        publicKeyMultibase: exported.publicKeyMultibase, secretKeyMultibase: exported.secretKeyMultibase
      });
    }
    return keys;
  },

  async derive({credential, selectivePointers, presentationHeader}) {
    const proof = [].concat(credential.proof)[0];
    let cryptosuite;
    if(proof.cryptosuite === 'bbs-2023') {
      const header = presentationHeader === undefined ? new Uint8Array() : encoder.encode(presentationHeader);
      cryptosuite = bbs2023.createDiscloseCryptosuite({selectivePointers, presentationHeader: header});
    } else {
      cryptosuite = ecdsaSd2023.createDiscloseCryptosuite({selectivePointers});
    }
    return vc.derive({verifiableCredential: credential, suite: new DataIntegrityProof({cryptosuite}), documentLoader});
  },

  async present({credentials, key, cryptosuite, challenge, domain, holder, version = 2.0}) {
    const presentation = vc.createPresentation({
      verifiableCredential: credentials, holder: holder === undefined ? key.controller : holder, version
    });
    const signer = (await keyPairOf(key)).signer();
    const suite = new DataIntegrityProof({signer, cryptosuite: SIGNING_SUITES[cryptosuite]()});
    return vc.signPresentation({presentation, suite, challenge, domain, documentLoader});
  },

  async 'verify-presentation'({presentation, challenge, domain, holder}) {
    // The holder's DID document: the presentation's proof must be made with one of its keys.
    const controller = holder === undefined ? undefined : (await documentLoader(holder)).document;
    const result = await vc.verify({
      presentation, challenge, domain, controller, suite: verifySuites(), documentLoader, checkStatus
    });
    return {verified: result.verified, errors: errorsOf(result)};
  },

  async 'verify-credential'({credential, expectedPresentationHeader}) {
    const result = await vc.verifyCredential({
      credential, suite: verifySuites({expectedPresentationHeader}), documentLoader, checkStatus
    });
    return {verified: result.verified, errors: errorsOf(result)};
  }
};

if(!(step in steps)) {
  process.stderr.write(`unknown step ${step}\n`);
  process.exit(2);
}
process.stdout.write(JSON.stringify(await steps[step](input)));
