//! The two envelopes of the wire form: [`PhysicalNode`] (one Lance physical
//! node) and [`Provider`] (one provider this crate creates), each a `oneof`
//! over the messages of [`super::proto`] and of the `db://` codecs.

/// One Lance physical node (its inputs travel as DataFusion's).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct PhysicalNode {
    #[prost(uint32, tag = "1")]
    pub format: u32,
    #[prost(
        oneof = "physical_node::Node",
        tags = "2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23"
    )]
    pub node: Option<physical_node::Node>,
}

pub(crate) mod physical_node {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(crate) enum Node {
        #[prost(message, tag = "2")]
        Scan(crate::codec::proto::ScanNode),
        #[prost(message, tag = "3")]
        Write(crate::codec::proto::WriteTarget),
        #[prost(message, tag = "4")]
        Commit(crate::codec::proto::CommitNode),
        #[prost(message, tag = "5")]
        Delete(crate::codec::proto::WriteTarget),
        #[prost(message, tag = "6")]
        Update(crate::codec::proto::WriteTarget),
        #[prost(message, tag = "7")]
        Merge(crate::codec::proto::MergeNode),
        #[prost(message, tag = "8")]
        Vacuum(crate::codec::proto::VacuumNode),
        #[prost(message, tag = "9")]
        Sink(crate::codec::proto::CommitNode),
        #[prost(message, tag = "10")]
        Tag(crate::codec::proto::TagNode),
        #[prost(message, tag = "11")]
        Optimize(crate::codec::proto::OptimizeNode),
        #[prost(message, tag = "12")]
        Index(crate::codec::proto::IndexNode),
        #[prost(message, tag = "13")]
        Search(crate::codec::proto::SearchNode),
        #[prost(message, tag = "14")]
        Alter(crate::codec::proto::AlterNode),
        #[prost(message, tag = "15")]
        CloudScan(crate::codec::cloud::CloudScanNode),
        #[prost(message, tag = "16")]
        CloudWrite(crate::codec::cloud::CloudWriteNode),
        #[prost(message, tag = "17")]
        CloudChange(crate::codec::cloud::CloudChangeNode),
        #[prost(message, tag = "18")]
        CloudMerge(crate::codec::cloud::CloudMergeNode),
        #[prost(message, tag = "19")]
        CloudSearch(crate::codec::cloud::CloudSearchNode),
        #[prost(message, tag = "20")]
        CloudDdl(crate::codec::cloud_ddl::CloudDdlNode),
        #[prost(message, tag = "21")]
        PermutationSplit(crate::codec::permutation::PermutationSplitNode),
        #[prost(message, tag = "22")]
        PermutationBuild(crate::codec::permutation::PermutationBuildNode),
        #[prost(message, tag = "23")]
        PermutationScan(crate::codec::permutation::PermutationScanNode),
    }
}

/// One provider this crate creates.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Provider {
    #[prost(uint32, tag = "1")]
    pub format: u32,
    #[prost(
        oneof = "provider::Table",
        tags = "2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23"
    )]
    pub table: Option<provider::Table>,
}

pub(crate) mod provider {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(crate) enum Table {
        #[prost(message, tag = "2")]
        Lance(crate::codec::proto::Table),
        #[prost(message, tag = "3")]
        Dml(crate::codec::proto::DmlTable),
        #[prost(message, tag = "4")]
        Merge(crate::codec::proto::MergeTable),
        #[prost(message, tag = "5")]
        Versions(crate::codec::proto::NamedTarget),
        #[prost(message, tag = "6")]
        Vacuum(crate::codec::proto::VacuumTable),
        #[prost(message, tag = "7")]
        CacheStats(crate::codec::proto::Empty),
        #[prost(message, tag = "8")]
        Fragments(crate::codec::proto::NamedTarget),
        #[prost(message, tag = "9")]
        Tags(crate::codec::proto::NamedTarget),
        #[prost(message, tag = "10")]
        Tag(crate::codec::proto::TagTable),
        #[prost(message, tag = "11")]
        Optimize(crate::codec::proto::OptimizeTable),
        #[prost(message, tag = "12")]
        Index(crate::codec::proto::IndexTable),
        #[prost(message, tag = "13")]
        Indices(crate::codec::proto::NamedTarget),
        #[prost(message, tag = "14")]
        VectorSearch(crate::codec::proto::VectorSearchTable),
        #[prost(message, tag = "15")]
        FullTextSearch(crate::codec::proto::FullTextSearchTable),
        #[prost(message, tag = "16")]
        Alter(crate::codec::proto::AlterTable),
        #[prost(message, tag = "17")]
        HybridSearch(crate::codec::proto::HybridSearchTable),
        #[prost(message, tag = "18")]
        Cloud(crate::codec::cloud::CloudProviderMessage),
        #[prost(message, tag = "19")]
        CloudDml(crate::codec::cloud_statements::CloudDmlTable),
        #[prost(message, tag = "20")]
        CloudMerge(crate::codec::cloud_statements::CloudMergeTable),
        #[prost(message, tag = "21")]
        CloudDdl(crate::codec::cloud_ddl::CloudDdlTable),
        #[prost(message, tag = "22")]
        ReadPermutation(crate::codec::permutation::ReadPermutationTable),
        #[prost(message, tag = "23")]
        BuildPermutation(crate::codec::permutation::BuildPermutationTable),
    }
}
