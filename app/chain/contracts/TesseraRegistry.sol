// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";

/// @title Tessera's agent registry
/// @notice Records keyed by DID: the agent's address, an optional owner and a card URI. Every
/// write carries an EIP-712 signature: the agent's own while its record names no owner, the
/// owner's once it does (except the release of the owner, which the agent may also sign). A relayer sends the transactions and pays gas; who may write is decided by
/// the signatures alone, so "only its own DID" and "refused when the record names an owner" hold on
/// chain whoever relays. Only the registrar (the deploying account, Tessera's relayer) creates
/// records: which key a DID belongs to is the network's decision, so nobody claims a DID first.
contract TesseraRegistry is EIP712 {
    struct Record {
        address agent;
        address owner;
        string cardURI;
    }

    bytes32 private constant REGISTER_TYPEHASH =
        keccak256("Register(string did,address agent,address owner,string cardURI,uint256 nonce,uint256 deadline)");
    bytes32 private constant SET_CARD_TYPEHASH =
        keccak256("SetCard(string did,string cardURI,uint256 nonce,uint256 deadline)");
    bytes32 private constant SET_OWNER_TYPEHASH =
        keccak256("SetOwner(string did,address owner,uint256 nonce,uint256 deadline)");
    bytes32 private constant DEREGISTER_TYPEHASH = keccak256("Deregister(string did,uint256 nonce,uint256 deadline)");

    address public immutable registrar;
    mapping(bytes32 didHash => Record) private _records;
    // Per DID and never reset, so a signature cannot be replayed after a deregistration either.
    mapping(bytes32 didHash => uint256) private _nonces;

    event Registered(bytes32 indexed didHash, string did, address indexed agent, address indexed owner, string cardURI);
    event CardSet(bytes32 indexed didHash, string did, string cardURI);
    event OwnerSet(bytes32 indexed didHash, string did, address indexed owner);
    event Deregistered(bytes32 indexed didHash, string did);

    error SignatureExpired(uint256 deadline);
    error AlreadyRegistered(string did);
    error NotRegistered(string did);
    error NoAgentAddress();
    error NotAuthorised(address signer, address expected);
    error NotRegistrar(address sender);

    constructor() EIP712("TesseraRegistry", "1") {
        registrar = msg.sender;
    }

    /// @notice The registry's interface version; Tessera's deregistration gate reads it.
    function version() external pure returns (string memory) {
        return "1.7.0";
    }

    function getRecord(string calldata did) external view returns (Record memory) {
        return _records[keccak256(bytes(did))];
    }

    function isRegistered(string calldata did) external view returns (bool) {
        return _records[keccak256(bytes(did))].agent != address(0);
    }

    function nonce(string calldata did) external view returns (uint256) {
        return _nonces[keccak256(bytes(did))];
    }

    /// @notice The EIP-712 domain separator signatures are made under (this chain, this contract).
    function domainSeparator() external view returns (bytes32) {
        return _domainSeparatorV4();
    }

    /// @notice Create the record of `did` (sent by the registrar), signed by `agent`; naming an
    /// owner also needs its signature.
    function register(
        string calldata did,
        address agent,
        address owner,
        string calldata cardURI,
        uint256 deadline,
        bytes calldata agentSignature,
        bytes calldata ownerSignature
    ) external {
        if (msg.sender != registrar) revert NotRegistrar(msg.sender);
        bytes32 didHash = keccak256(bytes(did));
        if (agent == address(0)) revert NoAgentAddress();
        if (_records[didHash].agent != address(0)) revert AlreadyRegistered(did);
        bytes32 digest = _digest(
            abi.encode(
                REGISTER_TYPEHASH, didHash, agent, owner, keccak256(bytes(cardURI)), _nonces[didHash], deadline
            ),
            deadline
        );
        _requireSigner(digest, agentSignature, agent);
        if (owner != address(0)) _requireSigner(digest, ownerSignature, owner);
        _nonces[didHash] += 1;
        _records[didHash] = Record(agent, owner, cardURI);
        emit Registered(didHash, did, agent, owner, cardURI);
    }

    /// @notice Replace the card URI of `did` (an empty URI removes it).
    function setCard(string calldata did, string calldata cardURI, uint256 deadline, bytes calldata signature)
        external
    {
        bytes32 didHash = keccak256(bytes(did));
        Record storage record = _requireRecord(didHash, did);
        bytes32 digest = _digest(
            abi.encode(SET_CARD_TYPEHASH, didHash, keccak256(bytes(cardURI)), _nonces[didHash], deadline), deadline
        );
        _requireSigner(digest, signature, _authority(record));
        _nonces[didHash] += 1;
        record.cardURI = cardURI;
        emit CardSet(didHash, did, cardURI);
    }

    /// @notice Name `owner` (signed by the current authority and by the new owner) or release the
    /// record (`owner` zero, signed by the owner or by the agent alone: an agent may always drop its
    /// owner, as it consented to it).
    function setOwner(
        string calldata did,
        address owner,
        uint256 deadline,
        bytes calldata authoritySignature,
        bytes calldata ownerSignature
    ) external {
        bytes32 didHash = keccak256(bytes(did));
        Record storage record = _requireRecord(didHash, did);
        bytes32 digest =
            _digest(abi.encode(SET_OWNER_TYPEHASH, didHash, owner, _nonces[didHash], deadline), deadline);
        if (owner == address(0) && record.owner != address(0)) {
            address signer = ECDSA.recover(digest, authoritySignature);
            if (signer != record.owner && signer != record.agent) revert NotAuthorised(signer, record.owner);
        } else {
            _requireSigner(digest, authoritySignature, _authority(record));
        }
        if (owner != address(0)) _requireSigner(digest, ownerSignature, owner);
        _nonces[didHash] += 1;
        record.owner = owner;
        emit OwnerSet(didHash, did, owner);
    }

    /// @notice Remove the record of `did`: the agent's signature, or the owner's once one is named.
    function deregister(string calldata did, uint256 deadline, bytes calldata signature) external {
        bytes32 didHash = keccak256(bytes(did));
        Record storage record = _requireRecord(didHash, did);
        bytes32 digest = _digest(abi.encode(DEREGISTER_TYPEHASH, didHash, _nonces[didHash], deadline), deadline);
        _requireSigner(digest, signature, _authority(record));
        _nonces[didHash] += 1;
        delete _records[didHash];
        emit Deregistered(didHash, did);
    }

    function _requireRecord(bytes32 didHash, string calldata did) private view returns (Record storage record) {
        record = _records[didHash];
        if (record.agent == address(0)) revert NotRegistered(did);
    }

    function _authority(Record storage record) private view returns (address) {
        return record.owner != address(0) ? record.owner : record.agent;
    }

    function _digest(bytes memory encodedStruct, uint256 deadline) private view returns (bytes32) {
        if (block.timestamp > deadline) revert SignatureExpired(deadline);
        return _hashTypedDataV4(keccak256(encodedStruct));
    }

    function _requireSigner(bytes32 digest, bytes calldata signature, address expected) private pure {
        address signer = ECDSA.recover(digest, signature);
        if (signer != expected) revert NotAuthorised(signer, expected);
    }
}
