use super::*;

#[test]
fn plans_parse_and_print() {
    let p = Plan::parse("seed=7,rate=0.25").unwrap();
    assert_eq!((p.seed, p.rate), (7, 0.25));
    assert!(Kind::ALL.iter().all(|k| p.has(*k)));
    assert_eq!(p.to_string(), "seed=7,rate=0.25");
    let p = Plan::parse("seed=1, rate=1, kinds=short_io+late").unwrap();
    assert!(p.has(Kind::ShortIo) && p.has(Kind::Late) && !p.has(Kind::Setup));
    assert_eq!(p.to_string(), "seed=1,rate=1,kinds=short_io+late");
    assert_eq!(Plan::parse(&p.to_string()).unwrap(), p);
    for bad in [
        "rate=0.1",
        "seed=1",
        "seed=x,rate=0.1",
        "seed=1,rate=2",
        "seed=1,rate=0.1,kinds=nope",
        "seed=1,rate=0.1,color=red",
        "seed",
    ] {
        assert!(Plan::parse(bad).is_err(), "{bad} parsed");
    }
}

#[test]
fn names_round_trip() {
    for k in Kind::ALL {
        assert_eq!(Kind::from_name(k.name()), Some(k));
    }
    assert_eq!(Kind::from_name("late"), Some(Kind::Late));
}

#[test]
fn shorten_keeps_alignment() {
    let _plan = set_thread_plan("seed=3,rate=1").unwrap();
    let mut f = Faults::new(Faults::URING);
    if !f.active() {
        return; // built without the feature: nothing to shorten with
    }
    for _ in 0..1000 {
        let n = f.shorten(65536).unwrap();
        assert!(n.is_multiple_of(4096) && (4096..65536).contains(&n));
        let n = f.shorten(1536).unwrap();
        assert!(n.is_multiple_of(512) && (512..1536).contains(&n));
        let n = f.shorten(100).unwrap();
        assert!((1..100).contains(&n));
    }
    assert_eq!(f.shorten(4096), None);
    assert_eq!(f.shorten(1), None);
}

#[test]
fn same_seed_same_stream_and_opt_out_silences() {
    let draws = |seed: u64| {
        let _plan = set_thread_plan(&format!("seed={seed},rate=0.5")).unwrap();
        #[cfg(feature = "fault-injection")]
        BUILT.with(|b| b.set(0));
        let mut f = Faults::new(Faults::URING);
        (0..64).map(|_| f.fire(Kind::Late)).collect::<Vec<_>>()
    };
    let a = draws(11);
    if !cfg!(feature = "fault-injection") {
        assert!(a.iter().all(|x| !x));
        return;
    }
    assert_eq!(a, draws(11));
    assert_ne!(a, draws(12));
    assert!(a.iter().any(|x| *x) && a.iter().any(|x| !x));
    let _plan = set_thread_plan("seed=1,rate=1").unwrap();
    let mut f = Faults::new(Faults::URING);
    {
        let _out = opt_out(&["late"]);
        assert!(!f.fire(Kind::Late));
        assert!(f.fire(Kind::ShortIo));
    }
    assert!(f.fire(Kind::Late));
}

#[test]
fn a_first_kind_fires_at_its_first_event_whatever_the_rate() {
    let p = Plan::parse("seed=5,rate=0,first=econnreset").unwrap();
    assert_eq!(p.to_string(), "seed=5,rate=0,first=econnreset");
    assert_eq!(Plan::parse(&p.to_string()).unwrap(), p);
    assert!(Plan::parse("seed=5,rate=0,first=nope").is_err());
    // A kind the plan does not inject is not injected first either.
    let p = Plan::parse("seed=5,rate=0,kinds=late,first=econnreset").unwrap();
    assert_eq!(p.to_string(), "seed=5,rate=0,kinds=late");
    let _plan = set_thread_plan("seed=5,rate=0,first=econnreset").unwrap();
    let mut f = Faults::new(Faults::URING);
    if !f.active() {
        return; // built without the feature: nothing fires
    }
    assert!(!f.fire(Kind::Late), "rate 0: no other kind");
    {
        // An opted-out kind keeps its first event for after the opt-out.
        let _out = opt_out_quietly(&["econnreset"]);
        assert!(!f.fire(Kind::Econnreset));
    }
    assert!(f.fire(Kind::Econnreset), "the first event");
    assert!(
        (0..100).all(|_| !f.fire(Kind::Econnreset)),
        "then the rate's"
    );
}
