//! What NCCL passes for functions, data types, algorithms and protocols: static string
//! literals from API v2 on, enum numbers in API v1.

use std::ffi::CStr;

/// The collective or point-to-point operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Func {
    Broadcast,
    Reduce,
    AllGather,
    ReduceScatter,
    AllReduce,
    SendRecv,
    Send,
    Recv,
    AlltoAll,
    Gather,
    Scatter,
}

impl Func {
    /// NCCL's string for profiler API v2+.
    pub fn name(self) -> &'static CStr {
        match self {
            Func::Broadcast => c"Broadcast",
            Func::Reduce => c"Reduce",
            Func::AllGather => c"AllGather",
            Func::ReduceScatter => c"ReduceScatter",
            Func::AllReduce => c"AllReduce",
            Func::SendRecv => c"SendRecv",
            Func::Send => c"Send",
            Func::Recv => c"Recv",
            Func::AlltoAll => c"AlltoAll",
            Func::Gather => c"Gather",
            Func::Scatter => c"Scatter",
        }
    }

    /// `ncclFunc_t` for profiler API v1; what the v1 shim sends for names it has no
    /// number for (Send).
    pub fn v1_number(self) -> u8 {
        match self {
            Func::Broadcast => 0,
            Func::Reduce => 1,
            Func::AllGather => 2,
            Func::ReduceScatter => 3,
            Func::AllReduce => 4,
            Func::SendRecv => 5,
            Func::Send => 6,
            Func::Recv => 7,
            Func::AlltoAll | Func::Gather | Func::Scatter => 6,
        }
    }

    /// The factor NCCL's tests use between algorithm and bus bandwidth.
    pub fn is_p2p(self) -> bool {
        matches!(self, Func::Send | Func::Recv)
    }
}

/// The element type (`ncclDataType_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataType {
    Int8,
    Uint8,
    Int32,
    Uint32,
    Int64,
    Uint64,
    Float16,
    Float32,
    Float64,
    Bfloat16,
}

impl DataType {
    /// NCCL's string: there is none for `ncclUint8`, which arrives as "Unknown".
    pub fn name(self) -> &'static CStr {
        match self {
            DataType::Int8 => c"ncclInt8",
            DataType::Uint8 => c"Unknown",
            DataType::Int32 => c"ncclInt32",
            DataType::Uint32 => c"ncclUint32",
            DataType::Int64 => c"ncclInt64",
            DataType::Uint64 => c"ncclUint64",
            DataType::Float16 => c"ncclFloat16",
            DataType::Float32 => c"ncclFloat32",
            DataType::Float64 => c"ncclFloat64",
            DataType::Bfloat16 => c"ncclBfloat16",
        }
    }

    pub fn v1_number(self) -> u8 {
        match self {
            DataType::Int8 => 0,
            DataType::Uint8 => 1,
            DataType::Int32 => 2,
            DataType::Uint32 => 3,
            DataType::Int64 => 4,
            DataType::Uint64 => 5,
            DataType::Float16 => 6,
            DataType::Float32 => 7,
            DataType::Float64 => 8,
            DataType::Bfloat16 => 9,
        }
    }

    pub fn size(self) -> usize {
        match self {
            DataType::Int8 | DataType::Uint8 => 1,
            DataType::Float16 | DataType::Bfloat16 => 2,
            DataType::Int32 | DataType::Uint32 | DataType::Float32 => 4,
            DataType::Int64 | DataType::Uint64 | DataType::Float64 => 8,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Algo {
    Tree,
    Ring,
    CollnetDirect,
    CollnetChain,
    Nvls,
    NvlsTree,
    Pat,
}

impl Algo {
    pub fn name(self) -> &'static CStr {
        match self {
            Algo::Tree => c"TREE",
            Algo::Ring => c"RING",
            Algo::CollnetDirect => c"COLLNET_DIRECT",
            Algo::CollnetChain => c"COLLNET_CHAIN",
            Algo::Nvls => c"NVLS",
            Algo::NvlsTree => c"NVLS_TREE",
            Algo::Pat => c"PAT",
        }
    }

    pub fn v1_number(self) -> u8 {
        self as u8
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Proto {
    Ll,
    Ll128,
    Simple,
}

impl Proto {
    pub fn name(self) -> &'static CStr {
        match self {
            Proto::Ll => c"LL",
            Proto::Ll128 => c"LL128",
            Proto::Simple => c"SIMPLE",
        }
    }

    pub fn v1_number(self) -> u8 {
        self as u8
    }
}
