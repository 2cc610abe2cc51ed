//! Webstore time zones: the names the original system stored (those of Rails'
//! `ActiveSupport::TimeZone`, such as `London` or `Wellington`) and IANA names (`Europe/London`),
//! resolved to a zone of the tz database bundled with `jiff`. The table below only says which
//! tz database zone each Rails name stands for; every offset and daylight-saving rule comes
//! from the tz database. Must not touch: clocks.

use jiff::tz::TimeZone;

/// Rails' zone names and the tz database zone each stands for.
const RAILS_NAMES: &[(&str, &str)] = &[
    ("Abu Dhabi", "Asia/Muscat"),
    ("Adelaide", "Australia/Adelaide"),
    ("Alaska", "America/Juneau"),
    ("Almaty", "Asia/Almaty"),
    ("American Samoa", "Pacific/Pago_Pago"),
    ("Amsterdam", "Europe/Amsterdam"),
    ("Arizona", "America/Phoenix"),
    ("Astana", "Asia/Dhaka"),
    ("Athens", "Europe/Athens"),
    ("Atlantic Time (Canada)", "America/Halifax"),
    ("Auckland", "Pacific/Auckland"),
    ("Azores", "Atlantic/Azores"),
    ("Baghdad", "Asia/Baghdad"),
    ("Baku", "Asia/Baku"),
    ("Bangkok", "Asia/Bangkok"),
    ("Beijing", "Asia/Shanghai"),
    ("Belgrade", "Europe/Belgrade"),
    ("Berlin", "Europe/Berlin"),
    ("Bern", "Europe/Zurich"),
    ("Bogota", "America/Bogota"),
    ("Brasilia", "America/Sao_Paulo"),
    ("Bratislava", "Europe/Bratislava"),
    ("Brisbane", "Australia/Brisbane"),
    ("Brussels", "Europe/Brussels"),
    ("Bucharest", "Europe/Bucharest"),
    ("Budapest", "Europe/Budapest"),
    ("Buenos Aires", "America/Argentina/Buenos_Aires"),
    ("Cairo", "Africa/Cairo"),
    ("Canberra", "Australia/Melbourne"),
    ("Cape Verde Is.", "Atlantic/Cape_Verde"),
    ("Caracas", "America/Caracas"),
    ("Casablanca", "Africa/Casablanca"),
    ("Central America", "America/Guatemala"),
    ("Central Time (US & Canada)", "America/Chicago"),
    ("Chatham Is.", "Pacific/Chatham"),
    ("Chennai", "Asia/Kolkata"),
    ("Chihuahua", "America/Chihuahua"),
    ("Chongqing", "Asia/Chongqing"),
    ("Copenhagen", "Europe/Copenhagen"),
    ("Darwin", "Australia/Darwin"),
    ("Dhaka", "Asia/Dhaka"),
    ("Dublin", "Europe/Dublin"),
    ("Eastern Time (US & Canada)", "America/New_York"),
    ("Edinburgh", "Europe/London"),
    ("Ekaterinburg", "Asia/Yekaterinburg"),
    ("Fiji", "Pacific/Fiji"),
    ("Georgetown", "America/Guyana"),
    ("Greenland", "America/Godthab"),
    ("Guadalajara", "America/Mexico_City"),
    ("Guam", "Pacific/Guam"),
    ("Hanoi", "Asia/Bangkok"),
    ("Harare", "Africa/Harare"),
    ("Hawaii", "Pacific/Honolulu"),
    ("Helsinki", "Europe/Helsinki"),
    ("Hobart", "Australia/Hobart"),
    ("Hong Kong", "Asia/Hong_Kong"),
    ("Indiana (East)", "America/Indiana/Indianapolis"),
    ("International Date Line West", "Etc/GMT+12"),
    ("Irkutsk", "Asia/Irkutsk"),
    ("Islamabad", "Asia/Karachi"),
    ("Istanbul", "Europe/Istanbul"),
    ("Jakarta", "Asia/Jakarta"),
    ("Jerusalem", "Asia/Jerusalem"),
    ("Kabul", "Asia/Kabul"),
    ("Kaliningrad", "Europe/Kaliningrad"),
    ("Kamchatka", "Asia/Kamchatka"),
    ("Karachi", "Asia/Karachi"),
    ("Kathmandu", "Asia/Kathmandu"),
    ("Kolkata", "Asia/Kolkata"),
    ("Krasnoyarsk", "Asia/Krasnoyarsk"),
    ("Kuala Lumpur", "Asia/Kuala_Lumpur"),
    ("Kuwait", "Asia/Kuwait"),
    ("Kyiv", "Europe/Kiev"),
    ("La Paz", "America/La_Paz"),
    ("Lima", "America/Lima"),
    ("Lisbon", "Europe/Lisbon"),
    ("Ljubljana", "Europe/Ljubljana"),
    ("London", "Europe/London"),
    ("Madrid", "Europe/Madrid"),
    ("Magadan", "Asia/Magadan"),
    ("Marshall Is.", "Pacific/Majuro"),
    ("Mazatlan", "America/Mazatlan"),
    ("Melbourne", "Australia/Melbourne"),
    ("Mexico City", "America/Mexico_City"),
    ("Mid-Atlantic", "Atlantic/South_Georgia"),
    ("Midway Island", "Pacific/Midway"),
    ("Minsk", "Europe/Minsk"),
    ("Monrovia", "Africa/Monrovia"),
    ("Monterrey", "America/Monterrey"),
    ("Montevideo", "America/Montevideo"),
    ("Moscow", "Europe/Moscow"),
    ("Mountain Time (US & Canada)", "America/Denver"),
    ("Mumbai", "Asia/Kolkata"),
    ("Muscat", "Asia/Muscat"),
    ("Nairobi", "Africa/Nairobi"),
    ("New Caledonia", "Pacific/Noumea"),
    ("New Delhi", "Asia/Kolkata"),
    ("Newfoundland", "America/St_Johns"),
    ("Novosibirsk", "Asia/Novosibirsk"),
    ("Nuku'alofa", "Pacific/Tongatapu"),
    ("Osaka", "Asia/Tokyo"),
    ("Pacific Time (US & Canada)", "America/Los_Angeles"),
    ("Paris", "Europe/Paris"),
    ("Perth", "Australia/Perth"),
    ("Port Moresby", "Pacific/Port_Moresby"),
    ("Prague", "Europe/Prague"),
    ("Pretoria", "Africa/Johannesburg"),
    ("Puerto Rico", "America/Puerto_Rico"),
    ("Quito", "America/Lima"),
    ("Rangoon", "Asia/Rangoon"),
    ("Riga", "Europe/Riga"),
    ("Riyadh", "Asia/Riyadh"),
    ("Rome", "Europe/Rome"),
    ("Samara", "Europe/Samara"),
    ("Samoa", "Pacific/Apia"),
    ("Santiago", "America/Santiago"),
    ("Sapporo", "Asia/Tokyo"),
    ("Sarajevo", "Europe/Sarajevo"),
    ("Saskatchewan", "America/Regina"),
    ("Seoul", "Asia/Seoul"),
    ("Singapore", "Asia/Singapore"),
    ("Skopje", "Europe/Skopje"),
    ("Sofia", "Europe/Sofia"),
    ("Solomon Is.", "Pacific/Guadalcanal"),
    ("Srednekolymsk", "Asia/Srednekolymsk"),
    ("Sri Jayawardenepura", "Asia/Colombo"),
    ("St. Petersburg", "Europe/Moscow"),
    ("Stockholm", "Europe/Stockholm"),
    ("Sydney", "Australia/Sydney"),
    ("Taipei", "Asia/Taipei"),
    ("Tallinn", "Europe/Tallinn"),
    ("Tashkent", "Asia/Tashkent"),
    ("Tbilisi", "Asia/Tbilisi"),
    ("Tehran", "Asia/Tehran"),
    ("Tijuana", "America/Tijuana"),
    ("Tokelau Is.", "Pacific/Fakaofo"),
    ("Tokyo", "Asia/Tokyo"),
    ("UTC", "Etc/UTC"),
    ("Ulaanbaatar", "Asia/Ulaanbaatar"),
    ("Urumqi", "Asia/Urumqi"),
    ("Vienna", "Europe/Vienna"),
    ("Vilnius", "Europe/Vilnius"),
    ("Vladivostok", "Asia/Vladivostok"),
    ("Volgograd", "Europe/Volgograd"),
    ("Warsaw", "Europe/Warsaw"),
    ("Wellington", "Pacific/Auckland"),
    ("West Central Africa", "Africa/Algiers"),
    ("Yakutsk", "Asia/Yakutsk"),
    ("Yerevan", "Asia/Yerevan"),
    ("Zagreb", "Europe/Zagreb"),
    ("Zurich", "Europe/Zurich"),
];

/// The zone a webstore's `time_zone` names: a Rails name or an IANA name. `None` for a name
/// neither knows.
pub fn resolve(name: &str) -> Option<TimeZone> {
    let name = name.trim();
    let iana = RAILS_NAMES
        .binary_search_by(|(rails, _)| rails.cmp(&name))
        .map_or(name, |at| RAILS_NAMES[at].1);
    TimeZone::get(iana).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rails_and_iana_names_resolve_and_others_do_not() {
        assert!(
            RAILS_NAMES.windows(2).all(|pair| pair[0].0 < pair[1].0),
            "the table is sorted for the binary search"
        );
        for (rails, iana) in RAILS_NAMES {
            let zone = resolve(rails).unwrap_or_else(|| panic!("{rails} → {iana} is unknown"));
            assert_eq!(zone.iana_name(), TimeZone::get(iana).unwrap().iana_name());
        }
        assert_eq!(
            resolve("Wellington").unwrap().iana_name(),
            Some("Pacific/Auckland")
        );
        assert_eq!(
            resolve("Europe/Berlin").unwrap().iana_name(),
            Some("Europe/Berlin")
        );
        for unknown in ["Atlantis", "", "Europe/Nowhere", "Mars/Olympus_Mons"] {
            assert!(resolve(unknown).is_none(), "{unknown}");
        }
    }
}
