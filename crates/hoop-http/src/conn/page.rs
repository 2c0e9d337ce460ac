//! What the configuration adds to a connection's answers (`crate::extras`): the head every
//! response starts from (with the security headers), the `Cache-Control` line of the file or
//! listing being answered, and the custom error pages for 403 and 404.

use std::time::Instant;

use super::Conn;
use crate::response::{write_status, Head};
use crate::status::Status;

impl<'a> Conn<'a> {
    /// A head with only the fields every response has, and the lines every response carries
    /// (the security headers, when on).
    pub(super) fn head<'h>(&self, status: Status, date: &'h str, keep: bool) -> Head<'h>
    where
        'a: 'h,
    {
        let sh = self.sh;
        Head {
            extra_headers: sh.extras.always(),
            ..Head::new(status, date, keep)
        }
    }

    /// Chooses the `Cache-Control` line of what is answered next: the one for `/rel` (`/rel/`
    /// with `slash`) of `content_type`, or none.
    pub(super) fn choose_cache_control(&mut self, rel: &[u8], slash: bool, content_type: &str) {
        let sh = self.sh;
        self.cache_control = sh.extras.cache_control(rel, slash, content_type);
    }

    /// Answers with the error `status`: its custom page when one was read at start (403,
    /// 404), else the built-in text. `None` if the connection failed while a big page went
    /// out.
    pub(super) async fn write_error(
        &mut self,
        status: Status,
        date: &str,
        keep: bool,
        head_only: bool,
    ) -> Option<()> {
        let sh = self.sh;
        let Some(page) = sh.extras.page(status) else {
            let head = self.head(status, date, keep);
            write_status(&mut self.out, head, head_only);
            return Some(());
        };
        Head {
            content_type: page.content_type,
            content_length: Some(page.body.len() as u64),
            ..self.head(status, date, keep)
        }
        .write(&mut self.out);
        if head_only {
            return Some(());
        }
        if self.out.len() + page.body.len() <= sh.cfg.one_send_max_bytes {
            self.out.extend_from_slice(&page.body);
            return Some(());
        }
        if !self.flush().await {
            return None;
        }
        self.timer.set(Instant::now() + sh.cfg.idle_timeout);
        match self
            .timer
            .run(self.stream.write_all(page.body.clone()))
            .await
        {
            Some((Ok(()), _)) => Some(()),
            _ => None,
        }
    }

    /// The body bytes of the error `status`'s answer to a GET: its page's, or the built-in
    /// text's (`CODE REASON\n`).
    pub(super) fn error_body_bytes(&self, status: Status) -> u64 {
        match self.sh.extras.page(status) {
            Some(page) => page.body.len() as u64,
            None => status.reason().len() as u64 + 5,
        }
    }
}
