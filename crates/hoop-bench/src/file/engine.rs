//! The engines of `hoop bench file`, by name.

use std::io;

use crate::plan::invalid;

/// An engine of `hoop bench file`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Engine {
    /// pread/pwrite loop, one thread.
    Sync,
    /// POSIX-AIO-like thread pool.
    Threadpool,
    /// The kernel's AIO by raw syscalls.
    LinuxAio,
    /// hoop, plain reads and writes.
    Uring,
    /// hoop, registered buffers.
    UringFixed,
    /// hoop, registered buffers, SQPOLL.
    UringSqpoll,
    /// hoop, registered buffers, IOPOLL.
    UringIopoll,
    /// The io-uring crate in a plain loop: the kernel's ceiling.
    RawUring,
    /// tokio::fs on a multi-thread tokio runtime (O_DIRECT: spawn_blocking + pread).
    TokioFs,
    /// hoop::shared::File from a multi-thread tokio runtime.
    Shared,
    /// fio's io_uring engine.
    Fio,
    /// fio's io_uring engine with fixed buffers and registered files.
    FioFixed,
    /// fio's psync engine.
    FioPsync,
    /// fio's libaio engine.
    FioLibaio,
    /// monoio's io_uring driver (`monoio::fs::File::read_at`), through `hoop-peer`.
    Monoio,
    /// compio's io_uring driver (`compio::fs::File::read_at`), through `hoop-peer`.
    Compio,
    /// tokio-uring (`tokio_uring::fs::File::read_at`), through `hoop-peer`.
    TokioUring,
    /// glommio (`DmaFile::read_at_aligned`, `BufferedFile::read_at`), through `hoop-peer`.
    Glommio,
    /// tokio's own io_uring file support (buffered only), through `hoop-peer`.
    TokioIoUring,
}

impl Engine {
    /// Every engine.
    pub(crate) const ALL: [Engine; 19] = [
        Engine::Sync,
        Engine::Threadpool,
        Engine::LinuxAio,
        Engine::Uring,
        Engine::UringFixed,
        Engine::UringSqpoll,
        Engine::UringIopoll,
        Engine::RawUring,
        Engine::TokioFs,
        Engine::Shared,
        Engine::Fio,
        Engine::FioFixed,
        Engine::FioPsync,
        Engine::FioLibaio,
        Engine::Monoio,
        Engine::Compio,
        Engine::TokioUring,
        Engine::Glommio,
        Engine::TokioIoUring,
    ];

    /// The peers: other runtimes' io_uring files, each on its own runtime in the `hoop-peer`
    /// binary (`peers/`, built on demand).
    pub(crate) const PEERS: [Engine; 5] = [
        Engine::Monoio,
        Engine::Compio,
        Engine::TokioUring,
        Engine::Glommio,
        Engine::TokioIoUring,
    ];

    /// The engines run when `--engines` is not given: all but fio's psync and libaio, which
    /// run on request.
    pub(crate) fn defaults() -> Vec<Engine> {
        Engine::ALL
            .into_iter()
            .filter(|e| !matches!(e, Engine::FioPsync | Engine::FioLibaio))
            .collect()
    }

    /// Whether this engine keeps one I/O in flight whatever the depth (sync, fio-psync).
    pub(crate) fn depth_one_by_nature(self) -> bool {
        matches!(self, Engine::Sync | Engine::FioPsync)
    }

    /// The engine named `name`, as `--engines` and the JSON say it.
    pub(crate) fn by_name(name: &str) -> Option<Engine> {
        Engine::ALL.into_iter().find(|e| e.name() == name)
    }

    /// The name, as `--engines` and the JSON say it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Engine::Sync => "sync",
            Engine::Threadpool => "threadpool",
            Engine::LinuxAio => "linux-aio",
            Engine::Uring => "uring",
            Engine::UringFixed => "uring-fixed",
            Engine::UringSqpoll => "uring-sqpoll",
            Engine::UringIopoll => "uring-iopoll",
            Engine::RawUring => "raw-io-uring",
            Engine::TokioFs => "tokio-fs",
            Engine::Shared => "shared",
            Engine::Fio => "fio",
            Engine::FioFixed => "fio-fixed",
            Engine::FioPsync => "fio-psync",
            Engine::FioLibaio => "fio-libaio",
            Engine::Monoio => "monoio",
            Engine::Compio => "compio",
            Engine::TokioUring => "tokio-uring",
            Engine::Glommio => "glommio",
            Engine::TokioIoUring => "tokio-io-uring",
        }
    }

    /// Whether this one runs on a multi-thread tokio runtime.
    pub(crate) fn on_tokio(self) -> bool {
        matches!(self, Engine::TokioFs | Engine::Shared)
    }

    /// Whether `hoop-peer` runs this one.
    pub(crate) fn is_peer(self) -> bool {
        Engine::PEERS.contains(&self)
    }

    /// Whether fio runs this one.
    pub(crate) fn is_fio(self) -> bool {
        matches!(
            self,
            Engine::Fio | Engine::FioFixed | Engine::FioPsync | Engine::FioLibaio
        )
    }
}

/// Parses `--engines` (duplicates dropped, order kept).
pub(crate) fn parse_engines(list: &[String]) -> io::Result<Vec<Engine>> {
    let mut engines = Vec::new();
    for name in list.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        let e = Engine::by_name(name).ok_or_else(|| {
            let known: Vec<&str> = Engine::ALL.iter().map(|e| e.name()).collect();
            invalid(format!(
                "--engines: unknown engine {name:?}; known: {}",
                known.join(", ")
            ))
        })?;
        if !engines.contains(&e) {
            engines.push(e);
        }
    }
    if engines.is_empty() {
        return Err(invalid("--engines: no engine given"));
    }
    Ok(engines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_parse_and_reject_unknown_names() {
        let l = |s: &str| s.split(',').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            parse_engines(&l("sync,uring,sync")).unwrap(),
            vec![Engine::Sync, Engine::Uring]
        );
        let e = parse_engines(&l("sync,nosuch")).unwrap_err().to_string();
        assert!(e.contains("nosuch") && e.contains("uring-fixed"), "{e}");
        for e in Engine::ALL {
            assert_eq!(parse_engines(&l(e.name())).unwrap(), vec![e]);
        }
    }
}
