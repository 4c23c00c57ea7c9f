// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ERC721} from "@openzeppelin/contracts/token/ERC721/ERC721.sol";
import {ERC721URIStorage} from "@openzeppelin/contracts/token/ERC721/extensions/ERC721URIStorage.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";

/// @title ERC-8004 Identity Registry
/// @notice Each agent is an ERC-721 token: its id is the `agentId`, its `tokenURI` the agent's
/// registration file. Written for Tessera after the ERC-8004 text: the three `register` forms,
/// `setAgentURI`, on-chain metadata with the reserved `agentWallet` key (set to the owner at
/// registration, changed only with the new wallet's EIP-712 signature, cleared by the owner or on
/// transfer).
contract IdentityRegistry is ERC721URIStorage, EIP712 {
    struct MetadataEntry {
        string metadataKey;
        bytes metadataValue;
    }

    string private constant AGENT_WALLET = "agentWallet";
    bytes32 private constant AGENT_WALLET_TYPEHASH =
        keccak256("AgentWalletSet(uint256 agentId,address newWallet,address owner,uint256 deadline)");

    uint256 private _lastAgentId;
    mapping(uint256 agentId => mapping(string metadataKey => bytes)) private _metadata;

    event Registered(uint256 indexed agentId, string agentURI, address indexed owner);
    event URIUpdated(uint256 indexed agentId, string newURI, address indexed updatedBy);
    event MetadataSet(
        uint256 indexed agentId, string indexed indexedMetadataKey, string metadataKey, bytes metadataValue
    );

    error ReservedMetadataKey(string metadataKey);
    error SignatureExpired(uint256 deadline);
    error WalletSignatureInvalid(address signer, address expected);

    constructor() ERC721("ERC-8004 Agent Identity", "AGENT") EIP712("ERC8004IdentityRegistry", "1") {}

    function register() external returns (uint256 agentId) {
        agentId = _mintAgent("");
    }

    function register(string calldata agentURI) external returns (uint256 agentId) {
        agentId = _mintAgent(agentURI);
    }

    function register(string calldata agentURI, MetadataEntry[] calldata metadata)
        external
        returns (uint256 agentId)
    {
        agentId = _mintAgent(agentURI);
        for (uint256 i = 0; i < metadata.length; i++) {
            _setMetadata(agentId, metadata[i].metadataKey, metadata[i].metadataValue);
        }
    }

    /// @notice Point `agentId` at a new registration file (its owner or an approved operator).
    function setAgentURI(uint256 agentId, string calldata newURI) external {
        _checkAuthorized(_ownerOf(agentId), msg.sender, agentId);
        _setTokenURI(agentId, newURI);
        emit URIUpdated(agentId, newURI, msg.sender);
    }

    function getMetadata(uint256 agentId, string calldata metadataKey) external view returns (bytes memory) {
        return _metadata[agentId][metadataKey];
    }

    function setMetadata(uint256 agentId, string calldata metadataKey, bytes calldata metadataValue) external {
        _checkAuthorized(_ownerOf(agentId), msg.sender, agentId);
        _setMetadata(agentId, metadataKey, metadataValue);
    }

    function getAgentWallet(uint256 agentId) external view returns (address) {
        bytes memory value = _metadata[agentId][AGENT_WALLET];
        return value.length == 0 ? address(0) : abi.decode(value, (address));
    }

    /// @notice Change the agent's wallet: sent by the owner, proven by the new wallet's EIP-712 signature.
    function setAgentWallet(uint256 agentId, address newWallet, uint256 deadline, bytes calldata signature) external {
        address owner = _ownerOf(agentId);
        _checkAuthorized(owner, msg.sender, agentId);
        if (block.timestamp > deadline) revert SignatureExpired(deadline);
        bytes32 digest =
            _hashTypedDataV4(keccak256(abi.encode(AGENT_WALLET_TYPEHASH, agentId, newWallet, owner, deadline)));
        address signer = ECDSA.recover(digest, signature);
        if (signer != newWallet) revert WalletSignatureInvalid(signer, newWallet);
        _storeMetadata(agentId, AGENT_WALLET, abi.encode(newWallet));
    }

    /// @notice Clear the agent's wallet (its owner or an approved operator).
    function unsetAgentWallet(uint256 agentId) external {
        _checkAuthorized(_ownerOf(agentId), msg.sender, agentId);
        _storeMetadata(agentId, AGENT_WALLET, "");
    }

    function _mintAgent(string memory agentURI) private returns (uint256 agentId) {
        agentId = ++_lastAgentId;
        _safeMint(msg.sender, agentId);
        _setTokenURI(agentId, agentURI);
        _storeMetadata(agentId, AGENT_WALLET, abi.encode(msg.sender));
        emit Registered(agentId, agentURI, msg.sender);
    }

    function _setMetadata(uint256 agentId, string memory metadataKey, bytes memory metadataValue) private {
        if (keccak256(bytes(metadataKey)) == keccak256(bytes(AGENT_WALLET))) revert ReservedMetadataKey(metadataKey);
        _storeMetadata(agentId, metadataKey, metadataValue);
    }

    function _storeMetadata(uint256 agentId, string memory metadataKey, bytes memory metadataValue) private {
        _metadata[agentId][metadataKey] = metadataValue;
        emit MetadataSet(agentId, metadataKey, metadataKey, metadataValue);
    }

    // A wallet proven for one owner is not vouched for by the next: a transfer clears it.
    function _update(address to, uint256 tokenId, address auth) internal override returns (address from) {
        from = super._update(to, tokenId, auth);
        if (from != address(0) && to != address(0)) {
            delete _metadata[tokenId][AGENT_WALLET];
            emit MetadataSet(tokenId, AGENT_WALLET, AGENT_WALLET, "");
        }
    }
}
